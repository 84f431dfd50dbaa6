"""Computing a by-iteration schedule of mtrain's own ahead, keyed on what it depends on.

With ``by_epoch=False`` an updater hook asks its policy for a value every
iteration (mmcv's ``get_regular_lr`` → ``get_lr`` per group, then the warmup).
For mtrain's own policy classes those calls are pure functions of the
iteration, ``runner.max_iters`` and the hook's attributes, so the hook may
compute ``AHEAD`` iterations at once and write one row per iteration. That is
only sound while nothing they depend on changes, so:

- **Behaviour**: only an instance of one of mtrain's own policy classes
  (listed with :func:`own_policy`), whose policy methods are still the
  functions mtrain defined — checked by identity on the class, and by name on
  the instance — is computed ahead. Any subclass (it may read anything on the
  runner), and any patched method, is asked every iteration as in mmcv.
- **State**: the rows are keyed on the hook's attributes, ``runner.max_iters``
  and the first iteration. An attribute assigned (or deleted) moves the
  hook's ``_state_version`` (:meth:`~.base.ScheduleHook.__setattr__`); the
  containers among the attributes (``base_lr``, ``step``: lists, tuples,
  dicts, sets) are also compared by value with a copy taken when the rows
  were computed, so an in-place change (``hook.step.append(12)``) counts.
  Any difference, or an iteration outside the rows (a resume, a jump),
  recomputes from there. Per iteration this is one integer comparison and
  one comparison of the few containers, not a copy of the hook's state. (A
  value written into ``hook.__dict__`` directly, bypassing assignment, is
  not seen; mtrain writes none, and a policy's attributes are assigned.)

The param groups themselves are not part of the key: the rows hold values,
and the hook writes them into ``runner.optimizer.param_groups`` as read at
each iteration (a rollback with ``optimizer.load_state_dict`` is followed).
"""

import operator
from typing import Any, Callable, Dict, List, Optional, Tuple

#: How many iterations a by-iteration schedule of mtrain's own computes at a time.
AHEAD = 512

#: The methods that decide a value. A policy class of mtrain's own is computed
#: ahead while each of these still resolves to the function mtrain defined.
POLICY_METHODS = (
    'get_lr', 'get_regular_lr', 'get_warmup_lr', 'get_momentum', 'get_regular_momentum',
    'get_warmup_momentum', 'progress', 'progress_fraction', 'max_progress', 'target',
    '_get_regular', '_get_warmup', '_regular_from', '_warmup_from', '_base_values',
    # The writers a row skips to reach _set_from (which it calls, with _write, by name).
    '_set', '_set_lr', '_set_momentum')

#: Attributes that change every iteration or hold the cache: not part of the key.
VOLATILE = frozenset(('regular_lr', 'regular_momentum', '_ahead', '_regular_epoch',
                      '_state_version'))

# class -> (a getter of its policy functions, the functions it had when declared,
#           the getter its plain get_regular_* chain asks, see _plain_chain)
_OWN: Dict[type, Tuple[Callable[[type], Any], Any]] = {}


def own_policy(cls: type) -> type:
    """Class decorator: declare one of mtrain's policies safe to compute ahead.

    Records the class's policy functions now; if any is replaced later
    (``cls.get_lr = ...``), the class is asked every iteration again.
    """
    methods = operator.attrgetter(*(n for n in POLICY_METHODS if hasattr(cls, n)))
    _OWN[cls] = (methods, methods(cls), _plain_chain(cls))
    return cls


def _plain_chain(cls: type) -> Optional[str]:
    """``get_lr`` (``get_momentum``) when ``cls._get_regular`` only asks it of each base value.

    True when ``_get_regular``, ``get_regular_lr`` and ``_regular_from`` are
    the base class's: the rows then call ``get_lr`` directly, four calls fewer
    a row. Decided when the class is declared; a later patch of any of them
    makes :func:`_own_class` false, and the hook is asked every iteration.
    """
    name = cls._value_getter
    if name is None:
        return None
    owner = next(c for c in cls.__mro__ if vars(c).get('_value_getter') == name)
    chain = ('_get_regular', 'get_regular' + name[3:], '_regular_from')
    return name if all(getattr(cls, n) is getattr(owner, n) for n in chain) else None


def _own_class(cls: type) -> bool:
    """One of mtrain's own policy classes, its policy functions still the ones it declared."""
    own = _OWN.get(cls)
    return own is not None and not cls.reads_group and own[0](cls) == own[1]


def computes_ahead(hook) -> bool:
    """Whether ``hook``'s values may come from the rows: mtrain's behaviour, unpatched."""
    return _own_class(type(hook)) and vars(hook).keys().isdisjoint(POLICY_METHODS)


def _containers(state: Dict[str, Any]) -> Callable[[Dict[str, Any]], Any]:
    """A getter, over a ``vars()``, of the attributes an in-place change can alter (lists...)."""
    names = sorted(k for k, v in state.items() if k not in VOLATILE and _frozen(v) is not v)
    if not names:
        return lambda attrs: None
    return operator.itemgetter(*names)


def _frozen(value: Any) -> Any:
    """A copy of ``value``'s containers (lists, tuples, dicts, sets), the rest shared.

    Compared with ``==`` to the live attributes: an in-place change of a list
    (``hook.step.append(12)``) shows, and any other object (a logger someone
    hung on the hook) is compared as itself, never copied.
    """
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return type(value)(_frozen(v) for v in value) if not hasattr(value, '_fields') \
            else value
    return value


class AheadCache:
    """The rows ``(regular, written)`` of iterations ``start``, ``start + 1``, … and their key."""

    __slots__ = ('rows', 'start', 'max_iters', 'version', 'containers', 'frozen')

    def __init__(self) -> None:
        self.rows: List[Tuple[Any, Any]] = []
        self.start = 0
        self.max_iters: Optional[int] = None
        self.version = -1  # the hook's _state_version the rows were computed at
        self.containers: Callable[[Dict[str, Any]], Any] = lambda attrs: None
        self.frozen: Any = None  # a copy of the containers' values then

    def row(self, hook, runner, cur: int) -> Optional[Tuple[Any, Any]]:
        """Iteration ``cur``'s (regular, written) values, recomputed when the key changed.

        None when the hook must be asked instead (:func:`computes_ahead` is false).
        """
        if not _own_class(type(hook)):  # (a class patch is not seen by the version)
            return None
        i = cur - self.start
        if not (hook._state_version == self.version and 0 <= i < len(self.rows)
                and runner.max_iters == self.max_iters
                and self.containers(vars(hook)) == self.frozen):
            if not computes_ahead(hook):  # a policy method assigned on the instance
                return None
            self._compute(hook, runner)
            i = 0
        return self.rows[i]

    def _compute(self, hook, runner) -> None:
        self.version = hook._state_version
        self.containers = _containers(vars(hook))
        self.frozen = _frozen(self.containers(vars(hook)))
        self.max_iters = runner.max_iters
        start = runner.iter
        stop = max(start + 1, min(start + AHEAD, runner.max_iters or 0))
        at = _RunnerAt(runner)
        plain, base = _OWN[type(hook)][2], getattr(hook, hook._base_attr)
        get_value = getattr(hook, plain) if plain and isinstance(base, list) else None
        rows = []
        for it in range(start, stop):
            at.iter = it
            # (what _get_regular would return, without its three calls when the chain is plain)
            regular = hook._get_regular(at) if get_value is None else \
                [get_value(at, b) for b in base]
            if hook.warmup is None or it >= hook.warmup_iters:
                rows.append((regular, regular))
            else:
                rows.append((regular, hook._warmup_from(it, regular)))
        self.rows, self.start = rows, start


class _RunnerAt:
    """What a policy of mtrain's own reads of the runner, at a given iteration."""

    __slots__ = ('iter', 'epoch', 'max_iters', 'max_epochs', 'data_loader', 'optimizer')

    def __init__(self, runner) -> None:
        self.iter = runner.iter
        self.epoch = runner.epoch
        self.max_iters = runner.max_iters
        self.max_epochs = getattr(runner, 'max_epochs', None)
        self.data_loader = runner.data_loader
        self.optimizer = runner.optimizer
