"""Evaluate on the val loader every N epochs/iterations; keep the best checkpoint.

Config (mmcv 1.x keys)::

    evaluation = dict(interval=1, metric='accuracy', save_best='accuracy', rule='greater')
"""

import inspect
import os
import os.path as osp
from typing import Any, Dict, List, Optional, Sequence, Union

import torch

from ..registry import HOOKS
from ..utils import ConfigError, broadcast_object, collect_results
from ..utils.errors import did_you_mean
from .hook import Hook, periodic_stages

_RULES = {'greater': lambda a, b: a > b, 'less': lambda a, b: a < b}


@HOOKS.register_module()
class EvalHook(Hook):
    """Run inference over ``dataloader`` and put the metrics in the log.

    The dataset scores the predictions: ``dataset.evaluate(predictions,
    metric=..., logger=...)`` returns ``{name: value}`` (the mmcls/mmdet 1.x
    convention), so any dataset with that method can be evaluated. If its
    ``evaluate`` has an ``out_dir`` argument it also gets the work dir and a
    ``tag`` such as ``'epoch_3'``, to write plots (a confusion matrix) there.

    Args:
        dataloader: the val loader (built from ``data.val``).
        interval: epochs (or iterations) between evaluations.
        by_epoch: count epochs or iterations.
        start: first epoch/iteration to evaluate at (default: the first interval).
        metric: metric name(s) passed to ``dataset.evaluate``.
        save_best: metric whose best value keeps ``best_<metric>_epoch_N.pth``
            (one file at a time); ``'auto'`` takes the first metric.
        rule: ``'greater'`` or ``'less'`` (default: greater, or less for
            metrics with ``loss`` in the name).
    """

    priority = 'LOW'

    def __init__(self, dataloader: Any, interval: int = 1, by_epoch: bool = True,
                 start: Optional[int] = None, metric: Union[str, Sequence[str]] = 'accuracy',
                 save_best: Optional[str] = None, rule: Optional[str] = None,
                 **eval_kwargs) -> None:
        if not isinstance(interval, int) or interval <= 0:
            raise ValueError(f'evaluation interval must be a positive integer, got {interval!r}')
        if rule is not None and rule not in _RULES:
            raise ValueError(f"evaluation rule must be 'greater' or 'less', got {rule!r}")
        _check_eval_kwargs(dataloader, eval_kwargs)
        self.dataloader = dataloader
        self.interval = interval
        self.by_epoch = by_epoch
        self.start = start
        self.metric = metric
        self.eval_kwargs = eval_kwargs
        self.save_best = save_best
        self.rule = rule
        self.best_score: Optional[float] = None
        self.best_ckpt_path: Optional[str] = None

    def triggered_stages(self) -> List[str]:
        return periodic_stages(self, self.by_epoch)

    def after_train_epoch(self, runner) -> None:
        if self.by_epoch and self._due(runner.epoch + 1):
            self.evaluate(runner)

    def after_train_iter(self, runner) -> None:
        if not self.by_epoch and self._due(runner.iter + 1):
            self.evaluate(runner)

    def _due(self, progress: int) -> bool:
        if self.start is None:
            return progress % self.interval == 0
        return progress >= self.start and (progress - self.start) % self.interval == 0

    @torch.no_grad()
    def predict(self, runner) -> torch.Tensor:
        """Predictions for every sample of the val set, in dataset order, on the CPU."""
        was_training = runner.model.training
        runner.model.eval()
        chunks: List[torch.Tensor] = []
        for batch in self.dataloader:
            out = runner.batch_processor(runner, batch, train_mode=False)
            chunks.append(out['predictions'].detach())
        runner.model.train(was_training)
        return collect_results(torch.cat(chunks), len(self.dataloader.dataset))

    def evaluate(self, runner) -> Dict[str, float]:
        runner.call_hook('before_evaluation')
        predictions = self.predict(runner)
        results: Dict[str, float] = {}
        if runner.rank == 0:
            results = self.dataloader.dataset.evaluate(
                predictions, metric=self.metric, logger=runner.logger,
                **self._output_kwargs(runner), **self.eval_kwargs)
        results = broadcast_object(results)
        runner.log_buffer.output.update(results)
        runner.log_buffer.ready = True
        runner.eval_results = results
        runner.call_hook('after_evaluation')
        if self.save_best:
            self._keep_best(runner, results)
        return results

    def _output_kwargs(self, runner) -> Dict[str, str]:
        """``out_dir`` (the work dir) and ``tag`` for datasets whose ``evaluate`` writes plots."""
        evaluate = self.dataloader.dataset.evaluate
        if runner.work_dir is None or 'out_dir' not in inspect.signature(evaluate).parameters:
            return {}
        unit, number = ('epoch', runner.epoch + 1) if self.by_epoch else ('iter', runner.iter + 1)
        return {'out_dir': runner.work_dir, 'tag': f'{unit}_{number}'}

    def _keep_best(self, runner, results: Dict[str, float]) -> None:
        key = next(iter(results)) if self.save_best == 'auto' else self.save_best
        if key not in results:
            raise KeyError(f"evaluation save_best='{key}' is not among the metrics "
                           f'{sorted(results)}; set save_best to one of them')
        rule = self.rule or ('less' if 'loss' in key else 'greater')
        score = results[key]
        if self.best_score is not None and not _RULES[rule](score, self.best_score):
            return
        self.best_score = score
        runner.meta.setdefault('hook_msgs', {})['best_score'] = score
        if runner.work_dir is None:
            return
        unit, number = ('epoch', runner.epoch + 1) if self.by_epoch else ('iter', runner.iter + 1)
        name = f'best_{key}_{unit}_{number}.pth'
        previous = self.best_ckpt_path
        # Every rank calls it (a sharded FSDP model gathers its weights); rank 0 writes.
        path = runner.save_checkpoint(runner.work_dir, filename_tmpl=name, create_symlink=False)
        if path is None:
            return
        self.best_ckpt_path = path
        if previous and previous != self.best_ckpt_path and osp.isfile(previous):
            os.remove(previous)  # only once the new best is whole on disk
        runner.logger.info(f'Now best checkpoint is saved as {name} ({key}: {score:.4f})')

    def state_dict(self) -> Dict[str, Any]:
        return {'best_score': self.best_score, 'best_ckpt_path': self.best_ckpt_path}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.best_score = state.get('best_score')
        self.best_ckpt_path = state.get('best_ckpt_path')


def _check_eval_kwargs(dataloader: Any, eval_kwargs: Dict[str, Any]) -> None:
    """Extra ``evaluation`` keys go to ``dataset.evaluate``: reject those it does not take."""
    evaluate = getattr(getattr(dataloader, 'dataset', None), 'evaluate', None)
    if not eval_kwargs or evaluate is None:
        return
    params = inspect.signature(evaluate).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    known = list(inspect.signature(EvalHook).parameters) + list(params)
    for name in eval_kwargs:
        if name not in params:
            raise ConfigError(f"'{name}' is neither an EvalHook option nor an argument of "
                              f'{type(dataloader.dataset).__name__}.evaluate.'
                              f'{did_you_mean(name, known)}', key=f'evaluation.{name}')
