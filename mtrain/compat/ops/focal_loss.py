"""Sigmoid and softmax focal loss kernels (forward and backward), elementwise in PyTorch.

mmcv's ``SigmoidFocalLossFunction`` / ``SoftmaxFocalLossFunction`` keep the
reduction, the softmax and the scaling by ``grad_output`` in Python; the
kernels only fill per-element losses and gradients. These are the kernels'
formulas term by term (mmcv has them for CUDA only; here they run on any
device), in the input's dtype, with the ``log(max(p, FLT_MIN))`` guard.
``exp``/``pow``/``log`` are PyTorch's, so a value can differ from mmcv's
CUDA kernel in the last bits (no compiled CPU kernel exists to compare with).

A target outside ``[0, num_classes)`` (the background class) selects no
class weight: mmcv's kernel would read past ``weight``; here it weighs 1.
"""

import torch
from torch import Tensor

FLT_MIN = torch.finfo(torch.float32).tiny


def _class_weight(weight: Tensor, target: Tensor) -> Tensor:
    inside = (target >= 0) & (target < weight.numel())
    picked = weight[target.clamp(0, weight.numel() - 1)]
    return torch.where(inside, picked, picked.new_ones(()))


def _sigmoid_parts(input: Tensor, target: Tensor, gamma: float, alpha: float):
    """Per element: is it the target class, ``p``, ``1 - p``, ``-alpha_t``, the ``pow`` and ``log``.

    mmcv computes both the positive and the negative term and zeroes one with a
    0/1 flag; choosing the operands per element first computes each ``pow``
    and ``log`` once, with the same operations on the term that survives.
    """
    classes = torch.arange(input.shape[1], device=input.device)
    pos = target[:, None] == classes
    p = 1. / (1. + torch.exp(-input))
    q = 1. - p
    a = input.new_tensor(alpha)  # a C float in mmcv's float kernel, as 1 - alpha is
    scale = torch.where(pos, -a, -(1. - a))
    power = torch.pow(torch.where(pos, q, p), gamma)
    log = torch.log(torch.where(pos, p, q).clamp(min=FLT_MIN))
    return pos, p, q, scale, power, log


def sigmoid_focal_loss_forward(input: Tensor, target: Tensor, weight: Tensor, output: Tensor,
                               gamma: float, alpha: float) -> None:
    """Fills ``output`` (N, C) with the per-element loss."""
    _, _, _, scale, power, log = _sigmoid_parts(input, target, gamma, alpha)
    loss = scale * (power * log)
    if weight.numel():
        loss = loss * _class_weight(weight, target)[:, None]
    output.copy_(loss)


def sigmoid_focal_loss_backward(input: Tensor, target: Tensor, weight: Tensor,
                                grad_input: Tensor, gamma: float, alpha: float) -> None:
    """Fills ``grad_input`` (N, C) with d(loss)/d(input), before mmcv scales it."""
    pos, p, q, scale, power, log = _sigmoid_parts(input, target, gamma, alpha)
    inner = torch.where(pos, q - (gamma * p * log), gamma * q * log - p)
    grad = scale * (power * inner)
    if weight.numel():
        grad = grad * _class_weight(weight, target)[:, None]
    grad_input.copy_(grad)


def _softmax_pred(softmax: Tensor, target: Tensor):
    labelled = target >= 0  # mmcv: a negative label contributes nothing
    pred = softmax.gather(1, target.clamp(min=0)[:, None])[:, 0]
    return labelled, pred


def softmax_focal_loss_forward(softmax: Tensor, target: Tensor, weight: Tensor, output: Tensor,
                               gamma: float, alpha: float) -> None:
    """Fills ``output`` (N, ) from the probabilities ``softmax`` (N, C)."""
    labelled, pred = _softmax_pred(softmax, target)
    loss = -alpha * torch.pow(1. - pred, gamma) * torch.log(pred.clamp(min=FLT_MIN))
    loss = torch.where(labelled, loss, loss.new_zeros(()))
    if weight.numel():
        loss = loss * _class_weight(weight, target)
    output.copy_(loss)


def softmax_focal_loss_backward(softmax: Tensor, target: Tensor, weight: Tensor, buff: Tensor,
                                grad_input: Tensor, gamma: float, alpha: float) -> None:
    """Fills ``buff`` (N, ) and ``grad_input`` (N, C), as mmcv's two backward kernels."""
    labelled, pred = _softmax_pred(softmax, target)
    b = alpha * (-torch.pow(1. - pred, gamma) + gamma * torch.pow(1. - pred, gamma - 1) * pred *
                 torch.log(pred.clamp(min=FLT_MIN)))
    b = torch.where(labelled, b, b.new_zeros(()))
    if weight.numel():
        b = b * _class_weight(weight, target)
    buff.copy_(b)
    classes = torch.arange(softmax.shape[1], device=softmax.device)
    flag = (target[:, None] == classes).to(softmax.dtype)
    grad = buff[:, None] * (flag - softmax)
    grad_input.copy_(torch.where(labelled[:, None], grad, grad.new_zeros(())))


ENTRY_POINTS = {
    'sigmoid_focal_loss_forward': sigmoid_focal_loss_forward,
    'sigmoid_focal_loss_backward': sigmoid_focal_loss_backward,
    'softmax_focal_loss_forward': softmax_focal_loss_forward,
    'softmax_focal_loss_backward': softmax_focal_loss_backward,
}
