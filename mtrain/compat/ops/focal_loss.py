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


def _sigmoid_terms(input: Tensor, target: Tensor):
    classes = torch.arange(input.shape[1], device=input.device)
    flag_p = (target[:, None] == classes).to(input.dtype)
    p = 1. / (1. + torch.exp(-input))
    return flag_p, 1. - flag_p, p


def sigmoid_focal_loss_forward(input: Tensor, target: Tensor, weight: Tensor, output: Tensor,
                               gamma: float, alpha: float) -> None:
    """Fills ``output`` (N, C) with the per-element loss."""
    flag_p, flag_n, p = _sigmoid_terms(input, target)
    term_p = torch.pow(1. - p, gamma) * torch.log(p.clamp(min=FLT_MIN))
    term_n = torch.pow(p, gamma) * torch.log((1. - p).clamp(min=FLT_MIN))
    loss = -flag_p * alpha * term_p + -flag_n * (1. - alpha) * term_n
    if weight.numel():
        loss = loss * _class_weight(weight, target)[:, None]
    output.copy_(loss)


def sigmoid_focal_loss_backward(input: Tensor, target: Tensor, weight: Tensor,
                                grad_input: Tensor, gamma: float, alpha: float) -> None:
    """Fills ``grad_input`` (N, C) with d(loss)/d(input), before mmcv scales it."""
    flag_p, flag_n, p = _sigmoid_terms(input, target)
    term_p = torch.pow(1. - p, gamma) * (1. - p - (gamma * p * torch.log(p.clamp(min=FLT_MIN))))
    term_n = torch.pow(p, gamma) * (gamma * (1. - p) * torch.log((1. - p).clamp(min=FLT_MIN)) - p)
    grad = -flag_p * alpha * term_p + -flag_n * (1. - alpha) * term_n
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
