"""End the run when a validation metric stops improving."""

from typing import Any, Dict, Optional

from ..defaults import metric_rule
from ..registry import HOOKS
from ..utils.errors import ConfigError
from .hook import Hook


@HOOKS.register_module()
class EarlyStoppingHook(Hook):
    """Stop after ``patience`` evaluations without an improvement of ``monitor``.

    Acts each time ``EvalHook`` has scored the model (the ``after_evaluation``
    point). The run ends cleanly: the epoch's hooks (checkpoint, logging) still run.

    Config::

        custom_hooks = [dict(type='EarlyStoppingHook', monitor='accuracy', patience=3)]

    Args:
        monitor: metric name, e.g. ``'accuracy'``.
        patience: evaluations without improvement before stopping.
        rule: ``'greater'`` or ``'less'`` (default: inferred from the name as the
            evaluation's ``save_best``, :func:`mtrain.defaults.metric_rule`).
        min_delta: the smallest change that counts as an improvement.
    """

    priority = 'NORMAL'

    def __init__(self, monitor: str = 'accuracy', patience: int = 5, rule: Optional[str] = None,
                 min_delta: float = 0.0) -> None:
        if rule not in (None, 'greater', 'less'):
            raise ValueError(f"rule must be 'greater' or 'less', got {rule!r}")
        if not isinstance(patience, int) or patience < 1:
            raise ValueError(f'patience must be a positive integer, got {patience!r}')
        if min_delta < 0:
            raise ValueError(f'min_delta must be >= 0, got {min_delta}')
        self.monitor = monitor
        self.patience = patience
        self.rule = metric_rule(monitor, rule)
        if self.rule is None:
            raise ConfigError(f"cannot tell whether a greater or a smaller '{monitor}' is better; "
                              "set rule='greater' or 'less'", key='custom_hooks')
        self.min_delta = min_delta
        self.best: Optional[float] = None
        self.wait = 0

    def before_run(self, runner) -> None:
        if self.wait >= self.patience:  # resumed from the checkpoint of the stopping epoch
            runner.should_stop = True

    def after_evaluation(self, runner) -> None:
        score = runner.eval_results.get(self.monitor)
        if score is None:
            raise KeyError(f"EarlyStoppingHook monitor '{self.monitor}' is not among the "
                           f'evaluation results {sorted(runner.eval_results)}')
        sign = 1 if self.rule == 'greater' else -1
        if self.best is None or sign * (score - self.best) > self.min_delta:
            self.best, self.wait = score, 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            runner.logger.info(f'early stopping: {self.monitor} has not improved on '
                               f'{self.best:.4f} for {self.wait} evaluations')
            runner.should_stop = True

    def state_dict(self) -> Dict[str, Any]:
        return {'best': self.best, 'wait': self.wait}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.best, self.wait = state.get('best'), state.get('wait', 0)
