"""What ``optimizer_config.micro_batch`` needs of the run, checked once before it starts.

The batch processor splits the batch and back-propagates each micro-batch
(the optimizer hook then only steps); on several processes every rank must
be able to retry a batch without anyone waiting inside a collective of the
model: plain DDP, whose gradient sync the processor does itself once all
ranks' attempts succeeded, and no ``SyncBatchNorm`` (a collective in every
forward).
"""

from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..utils import ConfigError, get_dist_info

KEY = 'optimizer_config.micro_batch'


def check_micro_batching(runner, steps_itself: bool) -> None:
    """Raise a one-line ``ConfigError`` if this run cannot use micro-batches (rank-local)."""
    processor = runner.batch_processor
    if not getattr(processor, 'splits_micro_batches', False):
        raise ConfigError(f'micro-batches are run by the batch processor, and '
                          f'{type(processor).__name__} does not split batches: use '
                          "batch_processor=dict(type='BasicBatchProcessor') or "
                          "'MultiBatchProcessor', or set micro_batch=None", key=KEY)
    if steps_itself:
        raise ConfigError(f'{type(runner.optimizer_hook).__name__} overrides after_train_iter '
                          '(it back-propagates itself), but with micro_batch the batch '
                          'processor back-propagates each micro-batch; set micro_batch=None',
                          key=KEY)
    if get_dist_info()[1] == 1:
        return
    if not isinstance(runner.model_wrapper, DistributedDataParallel):
        raise ConfigError(f'micro_batch on several processes needs DDP (MTDistributedDataParallel)'
                          f', got {type(runner.model_wrapper).__name__}: the ranks agree on the '
                          'size and average the gradients themselves; set micro_batch=None',
                          key=KEY)
    if any(isinstance(m, nn.SyncBatchNorm) for m in runner.model_wrapper.modules()):
        raise ConfigError('micro_batch cannot be used with SyncBatchNorm: its collective in '
                          'every forward would leave the other ranks waiting when one rank runs '
                          'out of memory; set sync_bn=False or micro_batch=None', key=KEY)
