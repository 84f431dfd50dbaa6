"""mtrain-only runtime keys and ``workflow`` val phases: what each framework does with them.

The converter drops each of these going to mmengine; these tests train both
sides (mtrain on the mmcv config, mmengine 0.10.7's ``Runner`` on the
conversion, the harness's toy network, 16 iterations) and show the verdict:
where the value asks for mmengine's own behaviour the trained weights agree
to 1e-6 (a note), where it does not the difference is the one the report
names (lossy).
"""

import pytest
import torch
from convert_harness import (_TOY, CvToyNet, max_rel_weight_diff, train_mmengine, train_mtrain,
                             weights)
from torch import nn

from mtrain.config_convert import to_mmengine
from mtrain.hooks import Hook
from mtrain.registry import HOOKS, MODELS

SGD = dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=1e-4)
EPOCHS = dict(type='EpochBasedRunner', max_epochs=2)  # 16 iterations


class CvValLossNet(CvToyNet):
    """Losses in eval mode too, as an mmcv 1.x model's ``val_step`` gave them."""

    def forward(self, img, gt_label=None):
        return {'loss': nn.functional.cross_entropy(self.net(img), gt_label)}


class ValLossRecorder(Hook):
    """The val phase's loss, averaged over each val epoch."""

    def __init__(self) -> None:
        self.means, self._losses = [], []

    def after_val_iter(self, runner) -> None:
        self._losses.append(float(runner.outputs['loss']))

    def after_val_epoch(self, runner) -> None:
        self.means.append(sum(self._losses) / len(self._losses))
        self._losses = []


MODELS.register_module(name='CvValLossNet', module=CvValLossNet, force=True)
HOOKS.register_module(name='ValLossRecorder', module=ValLossRecorder, force=True)


def lossy(report):
    return {e.source: e.reason for e in report.lossy_entries}


def test_workflow_val_phases_have_no_mmengine_counterpart(tmp_path):
    """mtrain's ('val', 1) phase logs a val loss each epoch; mmengine's Runner on the
    conversion runs no val phase at all (its ValLoop, when configured, computes metrics,
    never losses). Training is untouched: the weights agree."""
    cfg = dict(optimizer=SGD, runner=EPOCHS, workflow=[('train', 1), ('val', 1)])
    val_data = dict(_TOY['data'], val=dict(type='CvToyData'))
    converted, report = to_mmengine(dict(cfg, data=val_data))
    assert 'val losses' in lossy(report)['workflow']
    assert not {'workflow', 'val_cfg', 'val_evaluator'} & set(converted)
    ours, _ = train_mtrain(cfg, str(tmp_path / 'mtrain'), data=val_data,
                           model=dict(type='CvValLossNet'),
                           custom_hooks=[dict(type='ValLossRecorder')])
    theirs, _ = train_mmengine(converted, str(tmp_path / 'engine'))
    means = next(h for h in ours.hooks if isinstance(h, ValLossRecorder)).means
    assert len(means) == 2 and all(0 < m < 2 for m in means), means
    assert theirs._val_loop is None  # no val records on mmengine's side
    assert max_rel_weight_diff(weights(theirs.model), weights(ours.model)) < 1e-6


def test_nan_policy_is_lossy_and_none_is_mmengines_behaviour(tmp_path):
    """Sample 20 is NaN (iteration 2): mmengine steps on it and every weight becomes NaN;
    mtrain's nan_policy=dict(action='skip') skips that update; nan_policy=None is mmengine's."""
    cfg = dict(optimizer=SGD, runner=EPOCHS, nan_sample=20)
    converted, report = to_mmengine(dict(cfg, nan_policy=dict(action='skip')))
    assert 'steps on' in lossy(report)['nan_policy'] and 'nan_policy' not in converted
    _, report = to_mmengine(dict(cfg, nan_policy=None))
    assert not report.is_lossy, report.format()
    theirs, _ = train_mmengine(converted, str(tmp_path / 'engine'))
    skipped, _ = train_mtrain(cfg, str(tmp_path / 'skip'), nan_policy=dict(action='skip'))
    unchecked, _ = train_mtrain(cfg, str(tmp_path / 'none'), nan_policy=None)
    assert all(t.isnan().all() for t in weights(theirs.model).values())
    assert all(t.isfinite().all() for t in weights(skipped.model).values())
    assert all(t.isnan().all() for t in weights(unchecked.model).values())


@pytest.mark.parametrize('key,value,kind', [
    ('batch_processor', dict(type='BasicBatchProcessor'), 'note'),
    ('batch_processor', dict(type='BasicBatchProcessor', channels_last=True), 'lossy'),
    ('device', 'cpu', 'lossy'), ('device', None, 'note'),
    ('channels_last', True, 'lossy'), ('channels_last', False, 'note')])
def test_mtrain_only_keys_dropped(key, value, kind, tmp_path):
    """Each value's verdict, and the numbers: on this CPU machine every one of them trains
    mmengine's weights (device, memory format and the default processor change no value;
    the lossy part is what mmengine cannot be told: the device, the layout, a custom step)."""
    cfg = dict(optimizer=SGD, runner=EPOCHS, net='paramwise')  # a depth-wise conv: 4-D weights
    _, report = to_mmengine(dict(cfg, **{key: value}))
    (entry, ) = [e for e in report.entries if e.source == key]
    assert entry.kind == kind and entry.target == '(dropped)'
    ours, _ = train_mtrain(cfg, str(tmp_path / 'mtrain'), **{key: value})
    theirs, _ = train_mmengine(to_mmengine(cfg)[0], str(tmp_path / 'engine'))
    assert max_rel_weight_diff(weights(theirs.model), weights(ours.model)) < 1e-6
    if key == 'channels_last' and value:  # the layout is what mmengine cannot be told
        conv = dict(ours.model.named_parameters())['module.net.4.weight']
        assert conv.is_contiguous(memory_format=torch.channels_last)
