"""tools/train.py and an out-of-memory error: one line without micro_batch, a finished run with it."""

HUNGRY = '''
import torch

from mtrain.models.classifiers import LeNet
from mtrain.registry import MODELS


@MODELS.register_module(force=True)
class HungryLeNet(LeNet):
    """LeNet that runs out of memory in a training forward of more than 8 images."""

    def forward(self, img, gt_label=None, **kwargs):
        if self.training and img.shape[0] > 8:
            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 GiB')
        return super().forward(img, gt_label, **kwargs)
'''
BODY = "model = dict(type='HungryLeNet')\nrunner = dict(max_epochs=1)\nevaluation = None\n"


def test_off_the_run_stops_with_one_line_naming_the_batch_and_the_switch(train_tool, tmp_path,
                                                                        digits_config, capsys):
    code = train_tool.main([digits_config(HUNGRY, BODY), '--work-dir', str(tmp_path / 'w')])
    err = capsys.readouterr().err
    assert code == 1, err
    assert 'Traceback' not in err, err
    line = err[err.index('error:'):].strip()
    assert line.startswith('error: out of memory in the forward of a batch of 32 samples per '
                           'process (CUDA out of memory. Tried to allocate 20.00 GiB)'), line
    assert "micro_batch='auto'" in line and '\n' not in line, line


def test_auto_finishes_the_run_in_micro_batches_of_8(train_tool, tmp_path, digits_config, capsys):
    config = digits_config(HUNGRY, BODY + "optimizer_config = dict(micro_batch='auto')\n")
    assert train_tool.main([config, '--work-dir', str(tmp_path / 'w')]) == 0
    log = next((tmp_path / 'w').glob('*.log')).read_text()
    assert log.count("micro_batch='auto': out of memory with a batch of 32 samples at "
                     'iteration 1; it now runs as 4 micro-batches of up to 8 samples') == 1
