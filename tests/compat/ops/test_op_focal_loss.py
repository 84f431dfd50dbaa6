"""Focal-loss kernels: mmcv's expected values (on CPU), the plain PyTorch formula, gradcheck."""

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import gradcheck

from mtrain.compat.ops.focal_loss import sigmoid_focal_loss_forward
from op_functions import SigmoidFocalLoss, SoftmaxFocalLoss

# tests/test_ops/test_focal_loss.py (mmcv 1.7.2, CUDA-gated there): input, target, and
# (mean loss, grad) for softmax and sigmoid, gamma 2, alpha 0.25
INPUTS = [([[1., 0], [0, 1.]], [0, 1]),
          ([[1., 0, -1.], [0, 1., 2.]], [2, 1]),
          ([[1e-6, 2e-6, 3e-6], [4e-6, 5e-5, 6e-4], [7e-3, 8e-2, 9e-1]], [1, 2, 0])]
SOFTMAX = [(0.00566451, [[-0.00657264, 0.00657264], [0.00657264, -0.00657264]]),
           (0.34956908, [[0.10165970, 0.03739851, -0.13905823],
                         [0.01227554, -0.10298023, 0.09070466]]),
           (0.15754992, [[0.02590877, -0.05181759, 0.02590882],
                         [0.02589641, 0.02589760, -0.05179400],
                         [-0.07307514, 0.02234372, 0.05073142]])]
SIGMOID = [(0.13562961, [[-0.00657264, 0.11185755], [0.11185755, -0.00657264]]),
           (1.10251057, [[0.28808805, 0.11185755, -0.09602935],
                         [0.11185755, -0.00657264, 0.40376765]]),
           (0.42287254, [[0.07457182, -0.02485716, 0.07457201],
                         [0.07457211, 0.07457669, -0.02483728],
                         [-0.02462499, 0.08277918, 0.18050370]])]
NO_WEIGHT = torch.zeros(0)


@pytest.mark.parametrize('function, expected', [(SigmoidFocalLoss, SIGMOID),
                                                (SoftmaxFocalLoss, SOFTMAX)])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])
def test_mmcvs_own_expected_values(function, expected, dtype):
    for (x, y), (loss, grad) in zip(INPUTS, expected):
        x = torch.tensor(x, dtype=dtype, requires_grad=True)
        out = function.apply(x, torch.tensor(y), 2.0, 0.25, NO_WEIGHT.to(dtype))
        out.backward()
        torch.testing.assert_close(out.float(), torch.tensor(loss), rtol=1e-2, atol=1e-3)
        torch.testing.assert_close(x.grad.float(), torch.tensor(grad), rtol=1e-2, atol=1e-3)


def _py_sigmoid_focal_loss(x, target, gamma, alpha):
    """mmdet 2.x's ``py_sigmoid_focal_loss`` formula (background = num_classes), unreduced."""
    onehot = F.one_hot(target, x.shape[1] + 1)[:, :-1].to(x)
    p = x.sigmoid()
    pt = (1 - p) * onehot + p * (1 - onehot)
    weight = (alpha * onehot + (1 - alpha) * (1 - onehot)) * pt.pow(gamma)
    return F.binary_cross_entropy_with_logits(x, onehot, reduction='none') * weight


def test_sigmoid_equals_the_plain_formula_with_a_background_class():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 5, generator=g, dtype=torch.float64)
    target = torch.randint(0, 6, (64, ), generator=g)  # 5 is background: no positive
    out = torch.zeros_like(x)
    sigmoid_focal_loss_forward(x, target, NO_WEIGHT.double(), out, 2.0, 0.25)
    torch.testing.assert_close(out, _py_sigmoid_focal_loss(x, target, 2.0, 0.25))


@pytest.mark.parametrize('function', [SigmoidFocalLoss, SoftmaxFocalLoss])
@pytest.mark.parametrize('weighted', [False, True])
def test_gradcheck_float64(function, weighted):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 4, generator=g, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 3, 1, 2, 2, 0])
    weight = torch.rand(4, generator=g, dtype=torch.float64) if weighted else NO_WEIGHT.double()
    assert gradcheck(lambda t: function.apply(t, target, 2.0, 0.25, weight), (x, ))


def test_class_weight_scales_each_row_by_its_target_class():
    x = torch.randn(4, 3, dtype=torch.float64)
    target = torch.tensor([0, 1, 2, 1])
    weight = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    plain, weighted = torch.zeros_like(x), torch.zeros_like(x)
    sigmoid_focal_loss_forward(x, target, NO_WEIGHT.double(), plain, 2.0, 0.25)
    sigmoid_focal_loss_forward(x, target, weight, weighted, 2.0, 0.25)
    torch.testing.assert_close(weighted, plain * weight[target][:, None])


@pytest.mark.parametrize('function', [SigmoidFocalLoss, SoftmaxFocalLoss])
def test_empty_single_and_equal_rows(function):
    x = torch.zeros(0, 3, requires_grad=True)
    out = function.apply(x, torch.zeros(0, dtype=torch.long), 2.0, 0.25, NO_WEIGHT)
    assert out.isnan()  # mmcv's 'mean' divides 0 by 0 rows, as here
    one = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64, requires_grad=True)
    single = function.apply(one, torch.tensor([2]), 2.0, 0.25, NO_WEIGHT.double())
    rows = one.detach().repeat(4, 1).requires_grad_()
    same = function.apply(rows, torch.tensor([2] * 4), 2.0, 0.25, NO_WEIGHT.double())
    torch.testing.assert_close(same, single)  # the mean of equal rows is one row's loss
    single.backward()
    same.backward()
    torch.testing.assert_close(rows.grad, one.grad.repeat(4, 1) / 4)
