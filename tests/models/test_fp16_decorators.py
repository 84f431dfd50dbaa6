"""auto_fp16 / force_fp32 / wrap_fp16_model (mmcv.runner.fp16_utils) on torch.autocast.

mmcv 1.7.2 (torch >= 1.6): nothing happens until the module's ``fp16_enabled``
is True; then ``auto_fp16`` casts the fp32 tensors of ``apply_to`` to half and
runs under autocast, ``force_fp32`` casts half tensors to fp32 and runs with
autocast off. These run on the CPU's autocast (mmcv: CUDA's).
"""

import pytest
import torch
from torch import nn

from mtrain.models.fp16_utils import auto_fp16, cast_tensor_type, force_fp32, wrap_fp16_model
from mtrain.runner import BaseModule


class Head(BaseModule):
    """Decorated at class-definition time, as 1.x heads are."""

    def __init__(self):
        super().__init__()
        self.fp16_enabled = False
        self.fc = nn.Linear(4, 3)

    @auto_fp16(apply_to=('x', ))
    def forward(self, x, y):
        out = self.fc(x)
        return {'out': out, 'x': x.dtype, 'y': y.dtype, 'loss': self.loss(out, y)}

    @force_fp32(apply_to=('score', ))
    def loss(self, score, y):
        return {'score': score.dtype, 'y': y.dtype, 'mm': (score @ score.t()).dtype}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head()
        self.plain = nn.Linear(2, 2)

    @auto_fp16(out_fp32=True)
    def forward(self, x):
        return self.head.fc(x)


def test_nothing_changes_until_fp16_is_enabled():
    head = Head()
    x = torch.randn(2, 4)
    result = head(x, x)
    assert result['out'].dtype == torch.float32 and result['x'] == torch.float32
    assert result['loss']['mm'] == torch.float32


def test_auto_fp16_casts_apply_to_and_runs_under_autocast_force_fp32_leaves_it():
    head = Head()
    wrap_fp16_model(head)
    assert head.fp16_enabled
    x = torch.randn(2, 4)
    result = head(x, x)
    assert result['x'] == torch.float16 and result['y'] == torch.float32  # only apply_to
    assert result['out'].dtype == torch.float16  # the linear ran under autocast
    loss = result['loss']
    assert loss['score'] == torch.float32  # force_fp32 cast the half score back
    assert loss['mm'] == torch.float32  # and turned autocast off
    assert result['out'].float().allclose(head.fc(x.half().float()), atol=1e-2)


def test_keyword_arguments_are_cast_by_name():
    head = Head()
    wrap_fp16_model(head)
    result = head(y=torch.randn(2, 4), x=torch.randn(2, 4))
    assert result['x'] == torch.float16 and result['y'] == torch.float32


def test_out_fp32_and_the_told_dtype_wins_over_the_active_autocast():
    net = Net()
    wrap_fp16_model(net)
    x = torch.randn(2, 4)
    assert net(x).dtype == torch.float32  # out_fp32 cast the half output back
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert net.head(x, x)['x'] == torch.float16  # told float16 (the default)
    wrap_fp16_model(net, torch.bfloat16)
    result = net.head(x, x)
    assert result['x'] == torch.bfloat16 and result['out'].dtype == torch.bfloat16
    assert result['loss']['score'] == torch.float32  # bf16 is cast up too


def test_wrap_fp16_model_only_sets_modules_that_declare_the_flag():
    net = Net()
    wrap_fp16_model(net)
    assert net.head.fp16_enabled and not hasattr(net.plain, 'fp16_enabled')
    assert not hasattr(net, 'fp16_enabled')
    assert all(p.dtype == torch.float32 for p in net.parameters())  # the model stays fp32


def test_decorating_a_non_module_method_fails_at_call():
    class NotAModule:
        fp16_enabled = True

        @auto_fp16()
        def f(self, x):
            return x

        @force_fp32()
        def g(self, x):
            return x

    with pytest.raises(TypeError, match='@auto_fp16 can only be used'):
        NotAModule().f(torch.ones(1))
    with pytest.raises(TypeError, match='@force_fp32 can only be used'):
        NotAModule().g(torch.ones(1))


def test_cast_tensor_type_recurses_and_casts_only_the_source_dtype():
    data = {'a': torch.ones(1), 'b': [torch.ones(1, dtype=torch.long), 'text'], 'c': (torch.ones(1),)}
    out = cast_tensor_type(data, torch.float32, torch.float16)
    assert out['a'].dtype == torch.float16 and out['c'][0].dtype == torch.float16
    assert out['b'][0].dtype == torch.long and out['b'][1] == 'text'


class DecoratedToy(BaseModule):
    """The conftest toy model written the 1.x way: flag off, decorated forward and loss."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fp16_enabled = False
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)
        self.seen = []

    @auto_fp16(apply_to=('img', ))
    def forward(self, img, gt_label):
        self.seen.append(img.dtype)
        return {'loss_cls': self.loss(self.fc2(torch.relu(self.fc1(img))), gt_label)}

    @force_fp32(apply_to=('logits', ))
    def loss(self, logits, gt_label):
        self.seen.append(logits.dtype)
        return nn.functional.cross_entropy(logits, gt_label)


@pytest.mark.parametrize('dtype', ['float16', 'bfloat16'])
def test_the_fp16_hook_switches_decorated_methods_on(make_runner, toy_dataset, dtype):
    from mtrain.hooks import Fp16OptimizerHook
    batch = {'img': toy_dataset.x[:16], 'gt_label': toy_dataset.y[:16]}
    runner = make_runner(model=DecoratedToy(), by_epoch=False, max_len=1, lr=0.1)
    runner.register_hook(Fp16OptimizerHook(dtype=dtype, loss_scale=None if dtype == 'bfloat16'
                                           else 512.))
    runner.run([[batch]], [('train', 1)])
    half = getattr(torch, dtype)
    assert runner.model_wrapper.module.fp16_enabled
    assert runner.model_wrapper.module.seen == [half, torch.float32]  # forward in half, loss in fp32


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA GPU')
def test_on_a_gpu_the_decorators_use_cudas_autocast():
    head = Head().cuda()
    wrap_fp16_model(head)
    x = torch.randn(2, 4, device='cuda')
    result = head(x, x)
    assert result['out'].dtype == torch.float16 and result['loss']['mm'] == torch.float32


def test_loss_scaler_keeps_mmcvs_arithmetic():
    from mtrain.runner import LossScaler
    scaler = LossScaler(init_scale=16., scale_factor=2., scale_window=2)
    scales = []
    for overflow in (False, False, True, False, False):
        scaler.update_scale(overflow)
        scales.append(scaler.loss_scale)
    assert scales == [16., 32., 16., 16., 32.]  # grows every 2 quiet iterations after the last overflow
    floor = LossScaler(init_scale=1.)
    floor.update_scale(True)
    assert floor.loss_scale == 1
    p = nn.Parameter(torch.ones(2))
    p.grad = torch.tensor([1.0, float('inf')])
    assert scaler.has_overflow([p]) and not LossScaler(mode='static').has_overflow([p])
    p.grad = torch.ones(2)
    assert not scaler.has_overflow([p])
    restored = LossScaler()
    restored.load_state_dict(scaler.state_dict())
    assert restored.state_dict() == scaler.state_dict() == dict(
        cur_scale=32., cur_iter=5, mode='dynamic', last_overflow_iter=2, scale_factor=2.,
        scale_window=2)


class _Classifier(BaseModule):
    """A 1.x model whose forward is decorated; notes the dtype it computes in."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fp16_enabled = False
        self.fc = nn.Linear(4, 3)
        self.seen = []

    @auto_fp16(apply_to=('img', ))
    def forward(self, img, gt_label=None, return_loss=True):
        self.seen.append((self.training, img.dtype))
        logits = self.fc(img)
        if return_loss:
            return {'loss_cls': nn.functional.cross_entropy(logits.float(), gt_label)}
        return logits.float().softmax(1)


def test_a_bf16_runs_decorated_forward_computes_in_bf16_in_training_and_in_test(
        make_runner, toy_loader):
    # The half dtype is told by the run (fp16.dtype), not read from whichever autocast is
    # active: single_gpu_test runs without one, and must not fall back to float16.
    from mtrain.evaluation.inference import single_gpu_test
    from mtrain.hooks import Fp16OptimizerHook

    model = _Classifier()
    runner = make_runner(model=model, by_epoch=False, max_len=2)
    runner.register_hook(Fp16OptimizerHook(dtype='bfloat16'))
    runner.run([toy_loader], [('train', 1)])
    single_gpu_test(model, toy_loader)
    assert {dtype for training, dtype in model.seen if training} == {torch.bfloat16}
    assert {dtype for training, dtype in model.seen if not training} == {torch.bfloat16}
    wrap_fp16_model(model, torch.float16)
    single_gpu_test(model, toy_loader)
    assert model.seen[-1] == (False, torch.float16)
