"""The evaluation hook of a distributed run: mmcv 1.x's ``DistEvalHook`` options.

What each of its methods does across ranks ("collective" / "rank-local") is
written in :class:`~.evaluation.EvalHook`'s docstrings; this file adds the
distributed inference and its BatchNorm broadcast.
"""

from typing import Any, Callable, Optional, Sequence

import torch.distributed as dist
from torch.nn.modules.batchnorm import _BatchNorm

from ..evaluation.inference import multi_gpu_test
from ..registry import HOOKS
from .evaluation import EvalHook


@HOOKS.register_module()
class DistEvalHook(EvalHook):
    """:class:`EvalHook` for a distributed run, with mmcv's ``DistEvalHook`` options.

    Each rank infers its ``DistributedSampler`` share; the shares are gathered
    on rank 0 in dataset order. Config::

        evaluation = dict(interval=1, metric='mAP', gpu_collect=True)

    Args:
        broadcast_bn_buffer: copy rank 0's BatchNorm ``running_mean`` and
            ``running_var`` to every rank before inferring (DDP does not keep
            them equal), so all shares are scored by one model.
        tmpdir: a folder on a filesystem every rank sees, for
            ``gpu_collect=False`` (default: ``<work_dir>/.eval_hook``).
        gpu_collect: gather the pickled results through the process group
            (over the GPUs under NCCL) instead of files in ``tmpdir``.
        test_fn: ``test_fn(model, dataloader, tmpdir=..., gpu_collect=...)``
            returning the gathered results on rank 0; default:
            :func:`mtrain.evaluation.multi_gpu_test` (``mmcv.engine``'s).
        Other arguments: see :class:`EvalHook`.
    """

    default_test_fn = staticmethod(multi_gpu_test)

    def __init__(self, dataloader: Any, start: Optional[int] = None, interval: int = 1,
                 by_epoch: bool = True, save_best: Optional[str] = None,
                 rule: Optional[str] = None, test_fn: Optional[Callable] = None,
                 greater_keys: Optional[Sequence[str]] = None,
                 less_keys: Optional[Sequence[str]] = None, broadcast_bn_buffer: bool = True,
                 tmpdir: Optional[str] = None, gpu_collect: bool = False,
                 out_dir: Optional[str] = None, file_client_args: Optional[dict] = None,
                 **eval_kwargs) -> None:
        super().__init__(dataloader, start=start, interval=interval, by_epoch=by_epoch,
                         save_best=save_best, rule=rule, test_fn=test_fn,
                         greater_keys=greater_keys, less_keys=less_keys, out_dir=out_dir,
                         file_client_args=file_client_args, **eval_kwargs)
        self.broadcast_bn_buffer = broadcast_bn_buffer
        self.tmpdir = tmpdir
        self.gpu_collect = gpu_collect

    def test(self, runner) -> Any:
        """Collective: rank 0's BatchNorm statistics to every rank, then :meth:`EvalHook.test`."""
        if self.broadcast_bn_buffer and runner.world_size > 1:
            for module in runner.model.modules():
                if isinstance(module, _BatchNorm) and module.track_running_stats:
                    dist.broadcast(module.running_var, 0)
                    dist.broadcast(module.running_mean, 0)
        return super().test(runner)

    def _run_test_fn(self, runner) -> Any:
        return self.test_fn(runner.model, self.dataloader, tmpdir=self._tmpdir(runner),
                            gpu_collect=self.gpu_collect)
