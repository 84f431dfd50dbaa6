"""Evaluate on the val loader every N epochs/iterations; keep the best checkpoint.

Config (mmcv 1.x keys)::

    evaluation = dict(interval=1, metric='accuracy', save_best='auto')
    # mmdet 2.x style, on 2 processes: results gathered through the process group
    evaluation = dict(interval=1, metric='mAP', save_best='mAP', gpu_collect=True)

The run uses :class:`~.dist_evaluation.DistEvalHook` when it is distributed and :class:`EvalHook`
otherwise (as mmdet/mmseg's ``train_*`` functions choose); the keys only
``DistEvalHook`` takes (``gpu_collect``, ``tmpdir``, ``broadcast_bn_buffer``)
are dropped in one process, so one config runs both ways.
"""

import os
import os.path as osp
import warnings
from math import inf
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from ..defaults import METRIC_GREATER_KEYS, METRIC_LESS_KEYS, metric_rule
from ..evaluation.inference import gather, multi_gpu_test, single_gpu_test, uses_mmcv_contract
from ..registry import HOOKS
from ..utils import ConfigError, broadcast_object
from ..utils.errors import ConfigAssertionError
from ..utils.files import remove_checkpoint
from .eval_checks import (best_score, check_eval_config, check_eval_results, check_loader,
                          eval_predictions, evaluate_kwargs)
from .hook import Hook
from .logger import LoggerHook

#: The keys only DistEvalHook takes (dropped from `evaluation` in one process).
DIST_ONLY_KEYS = ('gpu_collect', 'tmpdir', 'broadcast_bn_buffer')


@HOOKS.register_module()
class EvalHook(Hook):
    """Run inference over ``dataloader``, score it with ``dataset.evaluate``, log the metrics.

    Two evaluation contracts, one rule (:func:`mtrain.evaluation.uses_mmcv_contract`):

    * a model whose ``forward`` takes ``return_loss`` (mmdet 2.x / mmseg 0.x /
      mmcls 0.x) is called as ``model(return_loss=False, **data)`` (plus
      ``rescale=True`` where its ``simple_test`` takes it) and its per-sample
      results (any Python objects) are gathered into a list in dataset order;
    * any other model follows mtrain's contract: the batch processor's eval
      ``predictions`` tensors, concatenated in dataset order.

    Either way each batch's results go to the CPU at once and the dataset
    scores them: ``dataset.evaluate(results, logger=runner.logger,
    **eval_kwargs)`` returns ``{name: value}`` (with ``out_dir`` and ``tag``
    such as ``'epoch_3'`` too when its ``evaluate`` takes ``out_dir``, to
    write plots). In a distributed run every rank scores its share, rank 0
    evaluates and every rank gets the metrics (``runner.eval_results``).

    The best checkpoint (``save_best``) is ``best_<key>_epoch_N.pth`` in
    ``out_dir``; ``runner.meta['hook_msgs']`` holds ``best_score`` and
    ``best_ckpt`` (also in every checkpoint), a resumed run continues from
    them and removes the previous best file when it saves a new one.

    Args:
        dataloader: the val loader (built from ``data.val``).
        start: evaluate from this epoch/iteration on; when it is at or before
            the epoch/iteration training starts (or resumes) at, also once
            before training. None: at every ``interval``.
        interval: epochs (or iterations) between evaluations.
        by_epoch: count epochs or iterations.
        save_best: the metric whose best value keeps a checkpoint; ``'auto'``
            takes the first metric ``evaluate`` returns.
        rule: ``'greater'`` or ``'less'``; None infers it from the key as
            mmcv does (``greater_keys`` then ``less_keys``, exact match first,
            then substring, case-insensitive).
        test_fn: ``test_fn(model, dataloader)`` returning the results.
            Default: :func:`mtrain.evaluation.single_gpu_test` (mmcv's
            ``mmcv.engine.single_gpu_test``; in a distributed run the shares
            are gathered as by ``multi_gpu_test``). 1.x subclasses call
            ``self.test_fn(runner.model, self.dataloader)`` themselves. A model
            whose ``forward`` takes no ``return_loss`` (mtrain's contract) is
            scored on the batch processor's predictions instead, unless a
            ``test_fn`` is given.
        greater_keys: keys for the ``'greater'`` rule (default: mmcv's
            ``acc, top, AR@, auc, precision, mAP, mDice, mIoU, mAcc, aAcc``).
        less_keys: keys for the ``'less'`` rule (default: ``loss``).
        out_dir: folder of the best checkpoint: ``out_dir/<work dir's name>``
            (default: the work dir).
        file_client_args: accepted for mmcv compatibility; files are local.
        mmengine_rule: validate as mmengine 0.10's train loops do, ``start``
            being ``val_begin``: at multiples of ``interval`` from ``start`` on
            and after the last epoch/iteration, never before training. Set by
            :func:`mtrain.config_convert.for_training` for an mmengine config
            whose points mmcv's rule cannot give (not an mmcv 1.x key).
        **eval_kwargs: passed to ``dataset.evaluate`` (e.g. ``metric='mAP'``).
    """

    priority = 'LOW'
    rule_map = {'greater': lambda x, y: x > y, 'less': lambda x, y: x < y}
    init_value_map = {'greater': -inf, 'less': inf}
    # mmcv's class attributes, which 1.x subclasses override; the rule is mtrain.defaults'.
    _default_greater_keys = list(METRIC_GREATER_KEYS)
    _default_less_keys = list(METRIC_LESS_KEYS)
    #: mmcv's default ``test_fn`` (``mmcv.engine.single_gpu_test``).
    default_test_fn = staticmethod(single_gpu_test)
    # How a distributed run gathers results; DistEvalHook takes them as arguments.
    gpu_collect = True
    tmpdir: Optional[str] = None
    broadcast_bn_buffer = False

    def __init__(self, dataloader: Any, start: Optional[int] = None, interval: int = 1,
                 by_epoch: bool = True, save_best: Optional[str] = None,
                 rule: Optional[str] = None, test_fn: Optional[Callable] = None,
                 greater_keys: Optional[Sequence[str]] = None,
                 less_keys: Optional[Sequence[str]] = None, out_dir: Optional[str] = None,
                 file_client_args: Optional[dict] = None, mmengine_rule: bool = False,
                 **eval_kwargs) -> None:
        check_loader(dataloader, type(self))
        if not isinstance(interval, int) or interval <= 0:
            raise ValueError(f'evaluation interval must be a positive integer, got {interval!r}')
        if start is not None and (not isinstance(start, int) or start < 0):
            raise ValueError(f'evaluation start must be an integer >= 0 or None, got {start!r}')
        if not isinstance(by_epoch, bool):
            raise ValueError(f'evaluation by_epoch must be True or False, got {by_epoch!r}')
        if save_best is not None and not isinstance(save_best, str):
            # an AssertionError too: mmcv 1.7.2 asserts it (its own tests catch that class)
            raise ConfigAssertionError(f"save_best must be a metric name, 'auto' or None, "
                                       f'got {save_best!r}', key='evaluation.save_best')
        self.dataloader = dataloader
        self.start = start
        self.interval = interval
        self.by_epoch = by_epoch
        self.mmengine_rule = mmengine_rule
        self.save_best = save_best
        self.test_fn = test_fn if test_fn is not None else self.default_test_fn
        self.greater_keys = _key_list(greater_keys, self._default_greater_keys)
        self.less_keys = _key_list(less_keys, self._default_less_keys)
        self.out_dir = out_dir
        self.eval_kwargs = eval_kwargs
        self.initial_flag = True
        self.rule: Optional[str] = None
        self.key_indicator = save_best
        check_eval_config(dataloader, eval_kwargs, save_best, type(self))
        if save_best is not None:
            self._init_rule(rule, save_best)
        elif rule is not None and rule not in self.rule_map:
            raise ConfigError(f"rule must be 'greater', 'less' or None, got {rule!r}",
                              key='evaluation.rule')
        self.best_score: Optional[float] = None
        self.best_ckpt_path: Optional[str] = None

    def _init_rule(self, rule: Optional[str], key: str) -> None:
        """Pick the comparison for ``key``: mmcv's inference when ``rule`` is None."""
        if rule is not None and rule not in self.rule_map:
            raise ConfigError(f"rule must be 'greater', 'less' or None, got {rule!r}",
                              key='evaluation.rule')
        if rule is None and key != 'auto':
            rule = metric_rule(key, greater_keys=self.greater_keys, less_keys=self.less_keys)
            if rule is None:
                raise ConfigError(f"cannot tell whether a greater or a smaller '{key}' is "
                                  "better; set evaluation.rule='greater' or 'less' (or list the "
                                  'key in greater_keys/less_keys)', key='evaluation.rule')
        self.rule = rule
        self.key_indicator = key

    # -- when -----------------------------------------------------------------
    def triggered_stages(self) -> List[str]:
        idle = ('before_train_iter', 'after_train_iter') if self.by_epoch else (
            'before_train_epoch', 'after_train_epoch')
        return [s for s in Hook.triggered_stages(self) if s not in idle]

    def before_run(self, runner) -> None:
        """Rank-local: where the best checkpoint goes, and the best so far (a resumed run's)."""
        if not self.out_dir:
            self.out_dir = runner.work_dir
        elif runner.work_dir is not None and self.out_dir != runner.work_dir:
            self.out_dir = osp.join(self.out_dir, osp.basename(runner.work_dir.rstrip(osp.sep)))
            runner.logger.info(f'The best checkpoint will be saved to {self.out_dir}')
        if self.save_best is None:
            return
        msgs = runner.meta.setdefault('hook_msgs', {})
        # This hook's state (restored by a resume) wins; else what the meta holds.
        if self.best_score is None:
            self.best_score = msgs.get('best_score')
        if self.best_ckpt_path is None:
            self.best_ckpt_path = msgs.get('best_ckpt')
        for key, value in (('best_score', self.best_score), ('best_ckpt', self.best_ckpt_path)):
            if value is not None:
                msgs[key] = value

    def before_train_epoch(self, runner) -> None:
        """Evaluate once before training when ``start`` <= the epoch it starts at (mmcv)."""
        if self.initial_flag and self._evaluates_first(runner.epoch):
            self.after_train_epoch(runner)
        self.initial_flag = False

    def before_train_iter(self, runner) -> None:
        if self.initial_flag and self._evaluates_first(runner.iter):
            self.after_train_iter(runner)
        self.initial_flag = False

    def after_train_epoch(self, runner) -> None:
        """Collective: every rank calls it, as in mmcv; evaluates when due."""
        if self._should_evaluate(runner):
            self._evaluate_on_every_rank(runner)

    def after_train_iter(self, runner) -> None:
        """Collective: every rank calls it, as in mmcv; evaluates when due."""
        if not self._should_evaluate(runner):
            return
        # The loggers write this iteration's training line first, so the metrics
        # get a line of their own ("mode": "val"), as in mmcv.
        for hook in runner.hooks:
            if isinstance(hook, LoggerHook):
                hook.after_train_iter(runner)
        runner.log_buffer.clear()
        self._evaluate_on_every_rank(runner)

    def _evaluate_on_every_rank(self, runner) -> None:
        """Collective (mtrain's own): :meth:`_do_evaluate`, then what rank 0 decided to every rank.

        1.x ``DistEvalHook._do_evaluate`` overrides (mmcv's own, mmseg 0.x's,
        mmcls 0.x's) call :meth:`evaluate` and :meth:`_save_ckpt` on rank 0
        alone; the metrics and the best checkpoint they decided reach the
        other ranks here, once ``_do_evaluate`` has returned on every rank.
        mtrain's own ``_do_evaluate`` shares them itself (before the
        ``after_evaluation`` hooks), and then nothing is left to do here.
        """
        self._shared = False
        self._do_evaluate(runner)
        if not self._shared:  # (the same on every rank: _do_evaluate runs on each)
            self._share_outcome(runner)

    def _evaluates_first(self, current: int) -> bool:
        """mmcv evaluates once before training from ``start`` on; mmengine never does."""
        return not self.mmengine_rule and self.start is not None and current >= self.start

    def _should_evaluate(self, runner) -> bool:
        current = (runner.epoch if self.by_epoch else runner.iter) + 1
        if self.mmengine_rule:  # EpochBasedTrainLoop / IterBasedTrainLoop.run
            last = runner.max_epochs if self.by_epoch else runner.max_iters
            return current >= (self.start or 1) and (current % self.interval == 0
                                                     or current == last)
        if self.start is None:
            return current % self.interval == 0
        return current >= self.start and (current - self.start) % self.interval == 0

    # -- what -----------------------------------------------------------------
    # The distributed contract of each method is mmcv 1.7.2's (docs/distributed.md): 1.x
    # subclasses override _do_evaluate in mmcv's shape, calling evaluate and _save_ckpt on
    # rank 0 only, so those two are rank-local; the collectives are in test (every rank
    # infers its share) and _share_outcome (rank 0's decisions to every rank).
    _shared = False  # whether this evaluation's outcome was shared (see _evaluate_on_every_rank)
    _latest_metrics: Optional[Dict[str, Any]] = None  # what evaluate scored, until shared
    _pending_best: Optional[tuple] = None  # the best checkpoint _save_ckpt chose, until written

    def _do_evaluate(self, runner) -> None:
        """Collective: infer on every rank, score on rank 0, share, keep the best checkpoint.

        Every rank calls it, as mmcv's ``DistEvalHook._do_evaluate`` (whose
        ``test_fn`` gathers the shares); a 1.x subclass may replace it.
        """
        runner.call_hook('before_evaluation')
        results = self.test(runner)
        if runner.rank == 0:  # the other ranks hold no results (test gathered them on rank 0)
            key_score = self.evaluate(runner, results)
            if self.save_best and key_score:  # mmcv skips a score of 0 (or None) too
                self._save_ckpt(runner, key_score)
        self._share_outcome(runner)  # before after_evaluation: the best file holds the scored weights
        runner.call_hook('after_evaluation')

    @property
    def custom_test_fn(self) -> bool:
        """Whether the user chose the inference (read at each use: 1.x hooks assign ``test_fn``).

        Else mtrain's own inference follows the model's contract.
        """
        return self.test_fn is not type(self).default_test_fn

    @torch.no_grad()
    def test(self, runner) -> Any:
        """Collective: the whole val set's results on rank 0 (None on the other ranks), on the CPU.

        Every rank infers its share and the shares are gathered (mtrain's own
        method; mmcv's ``test_fn`` is called here, on every rank, as in mmcv).
        """
        was_training = runner.model.training
        try:
            if self.custom_test_fn or uses_mmcv_contract(runner.model):
                runner.model.eval()
                return self._run_test_fn(runner)
            return self._predict(runner)
        finally:
            runner.model.train(was_training)

    def _run_test_fn(self, runner) -> Any:
        if self.test_fn is single_gpu_test and runner.world_size > 1:
            # mtrain's EvalHook gathers the ranks' shares (see docs/migration.md).
            return multi_gpu_test(runner.model, self.dataloader, self._tmpdir(runner),
                                  self.gpu_collect)
        return self.test_fn(runner.model, self.dataloader)

    def _predict(self, runner) -> Optional[torch.Tensor]:
        """mtrain's contract: the processor's eval ``predictions``, one tensor."""
        runner.model.eval()
        chunks: List[torch.Tensor] = []
        for batch in self.dataloader:
            out = runner.batch_processor(runner, batch, train_mode=False)
            chunks.append(eval_predictions(out, runner.model).detach().cpu())
        return gather(torch.cat(chunks), len(self.dataloader.dataset), self._tmpdir(runner),
                      self.gpu_collect)

    def _tmpdir(self, runner) -> Optional[str]:
        if self.tmpdir is not None or runner.work_dir is None or self.gpu_collect:
            return self.tmpdir
        return osp.join(runner.work_dir, '.eval_hook')

    def evaluate(self, runner, results: Any) -> Optional[float]:
        """Rank-local: score ``results``, log the metrics; return the ``save_best`` score.

        In a distributed run only rank 0 calls it, as in mmcv 1.x (whose
        ``DistEvalHook._do_evaluate`` does so, and 1.x subclasses copy it), so
        it holds no collective; the other ranks get the metrics
        (``runner.eval_results``, the log buffer) from :meth:`_share_outcome`.
        """
        metrics = check_eval_results(self.dataloader.dataset.evaluate(
            results, logger=runner.logger, **evaluate_kwargs(self, runner)),
            self.dataloader.dataset)
        self._latest_metrics = metrics
        _publish(runner, metrics, len(self.dataloader))
        if self.save_best is None:
            return None
        if not metrics:
            warnings.warn('the evaluation returned no metric: the best checkpoint is not '
                          'updated this time')
            return None
        if self.key_indicator == 'auto':
            self._init_rule(self.rule, next(iter(metrics)))
        if self.key_indicator not in metrics:
            raise KeyError(f"evaluation save_best='{self.key_indicator}' is not among the "
                           f'metrics {sorted(metrics)}; set save_best to one of them')
        return best_score(metrics, self.key_indicator, self.save_best, self.dataloader.dataset)

    def _save_ckpt(self, runner, key_score: float) -> None:
        """Rank-local: if ``key_score`` beats the best so far, make it the best and queue its file.

        Rank 0 alone calls it in a distributed run, as in mmcv 1.x. It notes
        ``best_score`` and ``best_ckpt`` (``runner.meta['hook_msgs']``); the
        file ``best_<key>_<epoch|iter>_N.pth`` is written by
        :meth:`_share_outcome`, with every rank (a sharded model gathers its
        weights), before the evaluation ends.
        """
        best = self.init_value_map[self.rule] if self.best_score is None else self.best_score
        if not self.rule_map[self.rule](key_score, best):
            return
        unit, number = ('epoch', runner.epoch + 1) if self.by_epoch else ('iter', runner.iter + 1)
        self.best_score = key_score
        msgs = runner.meta.setdefault('hook_msgs', {})
        msgs['best_score'] = key_score
        if self.out_dir is None:
            return
        name = f'best_{self.key_indicator}_{unit}_{number}.pth'
        previous, self.best_ckpt_path = self.best_ckpt_path, osp.join(self.out_dir, name)
        msgs['best_ckpt'] = self.best_ckpt_path  # in the best checkpoint's own meta too
        self._pending_best = (name, previous, key_score, f'{number} {unit}')

    def score_and_share(self, runner, results: Any) -> Dict[str, Any]:
        """Collective (mtrain's own): rank 0 scores ``results``, every rank gets the metrics.

        For code that runs :meth:`test` on every rank itself (``tools/test.py``):
        :meth:`evaluate` on rank 0, then :meth:`_share_outcome`. Returns
        ``runner.eval_results``.
        """
        if runner.rank == 0:
            self.evaluate(runner, results)
        self._share_outcome(runner)
        return runner.eval_results

    def _share_outcome(self, runner) -> None:
        """Collective (mtrain's own): rank 0's metrics and best checkpoint, on every rank.

        Every rank calls it once per evaluation (from :meth:`_do_evaluate`, or
        after a 1.x override of it). The other ranks get rank 0's metrics
        (``runner.eval_results``, read by early stopping on every rank, and
        the log buffer), its best score and file; then the new best file, if
        :meth:`_save_ckpt` chose one, is written.
        """
        self._shared = True
        mine = (self._latest_metrics, self.best_score, self.best_ckpt_path, self.rule,
                self.key_indicator, self._pending_best)
        self._latest_metrics = self._pending_best = None
        if runner.world_size > 1:
            mine = broadcast_object(mine)  # (rank 0's, on every rank)
        metrics, best_score, best_path, rule, key, pending = mine
        if runner.rank != 0:
            if metrics is not None:
                _publish(runner, metrics, len(self.dataloader))
            self.best_score, self.best_ckpt_path, self.rule, self.key_indicator = \
                best_score, best_path, rule, key
            if self.save_best is not None and best_score is not None:
                runner.meta.setdefault('hook_msgs', {}).update(best_score=best_score,
                                                               best_ckpt=best_path)
        if pending is not None:
            self._write_best(runner, *pending)

    def _write_best(self, runner, name: str, previous: Optional[str], score: float,
                    at: str) -> None:
        """Collective (mtrain's own): every rank gathers the state, rank 0 writes ``name``."""
        runner.gather_checkpoint_state()  # every rank (a sharded FSDP model's weights)
        if runner.rank != 0:
            return
        os.makedirs(self.out_dir, exist_ok=True)
        # mmcv's call: a 1.x runner's own save_checkpoint takes it too (and returns None)
        runner.save_checkpoint(self.out_dir, filename_tmpl=name, create_symlink=False)
        path = osp.join(self.out_dir, name)
        if previous and previous != path and (osp.isfile(previous) or osp.isdir(previous)):
            remove_checkpoint(previous)  # only once the new best is whole on disk
            runner.logger.info(f'The previous best checkpoint {previous} was removed')
        runner.logger.info(f'Now best checkpoint is saved as {name}.')
        runner.logger.info(f'Best {self.key_indicator} is {score:0.4f} at {at}.')

    def state_dict(self) -> Dict[str, Any]:
        return {'best_score': self.best_score, 'best_ckpt_path': self.best_ckpt_path}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.best_score = state.get('best_score')
        self.best_ckpt_path = state.get('best_ckpt_path')


def _publish(runner, metrics: Dict[str, Any], eval_iter_num: int) -> None:
    """Put ``metrics`` in the log buffer (a line of their own) and ``runner.eval_results``."""
    runner.log_buffer.output['eval_iter_num'] = eval_iter_num
    runner.log_buffer.output.update(metrics)
    runner.log_buffer.ready = True
    runner.eval_results = metrics


def _key_list(keys: Optional[Sequence[str]], default: List[str]) -> List[str]:
    if keys is None:
        return list(default)
    if isinstance(keys, str):
        return [keys]
    if not all(isinstance(k, str) for k in keys):
        raise ValueError(f'greater_keys/less_keys must be strings, got {keys!r}')
    return list(keys)
