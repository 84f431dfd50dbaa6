"""DataContainer batches under 2-process gloo DDP (MMDistributedDataParallel and mtrain's own).

Each rank's loader collates its share with mmcv's ``collate``; the wrapper
unpacks the containers before DDP's forward (mmcv's ``MMDistributedDataParallel``
did this on GPUs only; mtrain also on the CPU). 2 ranks of batch B must end
with the weights of one process of batch 2B, and every sample's own
``img_metas`` must reach the model.
"""

import os

import pytest
import torch

from dist_launch import launch
from mtrain.parallel import MMDistributedDataParallel, MTDistributedDataParallel
from test_data_container import MetaDataset, MetaModel
from toy_training import params, train_toy

pytestmark = pytest.mark.slow


def _job(rank, wrap, work_dir, out_dir):
    runner = train_toy(MetaModel, MetaDataset, work_dir, 8, wrap=wrap)
    torch.save({'params': params(runner.model_wrapper.module), 'indices': runner.model_wrapper.module.indices},
               os.path.join(out_dir, f'rank{rank}.pt'))


@pytest.mark.parametrize('wrap', [MMDistributedDataParallel, MTDistributedDataParallel])
def test_two_ranks_on_containers_equal_one_process_of_twice_the_batch(tmp_path, wrap):
    reference = train_toy(MetaModel, MetaDataset, tmp_path / 'single', 16)
    out = tmp_path / 'out'
    out.mkdir()
    codes, _ = launch(_job, wrap, tmp_path / 'ddp', str(out), timeout=300)
    assert codes == [0, 0]
    results = [torch.load(out / f'rank{r}.pt', weights_only=True) for r in (0, 1)]
    assert sorted(results[0]['indices'] + results[1]['indices']) == sorted(list(range(64)) * 2)
    for result in results:
        for name, value in params(reference.model_wrapper.module).items():
            torch.testing.assert_close(result['params'][name], value, rtol=0, atol=1e-6)
