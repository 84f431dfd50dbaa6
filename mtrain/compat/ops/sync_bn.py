"""``sync_bn_*`` of ``mmcv._ext``: the per-process pieces of mmcv 1.7.2's ``MMSyncBN``.

mmcv's ``SyncBatchNormFunction`` does the synchronisation itself: it calls
``sync_bn_forward_mean`` (local per-channel mean), all-reduces it,
``sync_bn_forward_var`` (local mean of squared deviations from the global
mean), all-reduces that, then ``sync_bn_forward_output`` (normalise, affine,
update the running statistics with the unbiased variance over
``num * spatial * group_size`` values). Backward: ``sync_bn_backward_param``
(local sums of ``grad * norm`` and ``grad``), all-reduced and averaged by the
wrapper, then ``sync_bn_backward_data``. On one process (``group_size`` 1)
this is plain batch norm; under DDP it is synchronised batch norm, the
all-reduces being mmcv's own. As in mmcv's kernels, statistics, ``norm``,
``std`` and the affine parameters are float32 while ``input``/``output`` may
be half (the arithmetic is done in the statistics' dtype: float32 from
mmcv's wrapper, float64 where a caller passes float64 buffers). Input is ``(num, channels,
spatial)``.
"""

from torch import Tensor


def sync_bn_forward_mean(input: Tensor, mean: Tensor) -> None:
    """``mean[c]``: the mean of channel ``c`` over batch and space."""
    mean.copy_(input.to(mean.dtype).mean(dim=(0, 2)))


def sync_bn_forward_var(input: Tensor, mean: Tensor, var: Tensor) -> None:
    """``var[c]``: the mean of ``(x - mean[c])**2`` over batch and space (``mean`` given)."""
    var.copy_((input.to(var.dtype) - mean.view(1, -1, 1)).pow(2).mean(dim=(0, 2)))


def sync_bn_forward_output(input: Tensor, mean: Tensor, var: Tensor, weight: Tensor,
                           bias: Tensor, running_mean: Tensor, running_var: Tensor,
                           norm: Tensor, std: Tensor, output: Tensor, eps: float,
                           momentum: float, group_size: int) -> None:
    """Fills ``norm``, ``std`` and ``output``; moves the running statistics by ``momentum``.

    ``momentum`` arrives as a one-element tensor (0 when every rank's batch was
    empty, so the statistics stay put).
    """
    num, _, spatial = input.shape
    std_value = (var + eps).sqrt()
    normed = (input.to(norm.dtype) - mean.view(1, -1, 1)) / std_value.view(1, -1, 1)
    norm.copy_(normed)
    std.copy_(std_value)
    out = normed
    if weight is not None:
        out = normed * weight.view(1, -1, 1) + bias.view(1, -1, 1)
    output.copy_(out)
    if running_mean is not None:
        m = float(momentum)
        count = num * spatial * group_size
        unbiased = var * count / (count - 1) if count > 1 else var
        running_mean.copy_(m * mean + (1 - m) * running_mean)
        running_var.copy_(m * unbiased + (1 - m) * running_var)


def sync_bn_backward_param(grad_output: Tensor, norm: Tensor, grad_weight: Tensor,
                           grad_bias: Tensor) -> None:
    """The local ``sum(grad * norm)`` and ``sum(grad)`` per channel."""
    grad = grad_output.to(norm.dtype)
    grad_weight.copy_((grad * norm).sum(dim=(0, 2)))
    grad_bias.copy_(grad.sum(dim=(0, 2)))


def sync_bn_backward_data(grad_output: Tensor, weight: Tensor, grad_weight: Tensor,
                          grad_bias: Tensor, norm: Tensor, std: Tensor,
                          grad_input: Tensor) -> None:
    """``grad_input = w * (grad - (gw * norm + gb) / (num * spatial)) / std``.

    ``grad_weight``/``grad_bias`` are the sums averaged over the ranks by
    mmcv's wrapper; dividing by the local count gives the synchronised
    gradient when every rank has the same batch size, as in mmcv.
    """
    num, _, spatial = grad_output.shape
    per = lambda t: t.view(1, -1, 1)  # noqa: E731
    shift = (per(grad_weight) * norm + per(grad_bias)) / (num * spatial)
    grad_input.copy_(per(weight) * (grad_output.to(norm.dtype) - shift) / per(std))


ENTRY_POINTS = {
    'sync_bn_forward_mean': sync_bn_forward_mean,
    'sync_bn_forward_var': sync_bn_forward_var,
    'sync_bn_forward_output': sync_bn_forward_output,
    'sync_bn_backward_param': sync_bn_backward_param,
    'sync_bn_backward_data': sync_bn_backward_data,
}
