"""Shared toy fixtures: a tiny model, a real in-memory loader, a runner factory."""

import logging
import os
import random

# One intra-op thread for the tests and every process they start (inherited through the
# environment): the tests' tensors are tiny, and with several processes on 2 cores OpenMP's
# spinning threads made a digits run 6x slower (71 s against 12 s under load). A test that is
# about threads sets its own value.
for _name in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS'):
    os.environ.setdefault(_name, '1')

import pytest  # noqa: E402 (after the thread setting)
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402

from mtrain.datasets import build_dataloader  # noqa: E402
from mtrain.evaluation import evaluate_classification  # noqa: E402
from mtrain.runner import EpochBasedRunner, IterBasedRunner  # noqa: E402


def pytest_configure(config):
    """Draw the kill-anywhere matrix's sample seed once per run, before any worker starts.

    With ``pytest -n 2`` every worker collects the tests itself; they inherit this variable
    from the controller, so all of them draw the same sample (``MTRAIN_MATRIX_SEED`` set by
    hand repeats one).
    """
    if not hasattr(config, 'workerinput'):
        os.environ.setdefault('MTRAIN_MATRIX_SEED', str(random.SystemRandom().randrange(10**6)))


class ToyDataset(Dataset):
    """64 samples of 4 features, 3 linearly separable classes (fixed seed)."""

    def __init__(self, n: int = 64, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g)
        self.y = (self.x[:, 0] > 0).long() + (self.x[:, 1] > 0.5).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        return {'img': self.x[i], 'gt_label': self.y[i]}

    def evaluate(self, results, metric='accuracy', logger=None):
        return evaluate_classification(results, self.y, metric)


class ToyModel(nn.Module):
    """Linear → ReLU → Linear following the model contract."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, img, gt_label=None):
        logits = self.fc2(torch.relu(self.fc1(img)))
        if self.training:
            return {'loss_cls': nn.functional.cross_entropy(logits, gt_label),
                    'acc': (logits.argmax(1) == gt_label).float().mean()}
        return logits.softmax(1)


@pytest.fixture
def toy_dataset():
    return ToyDataset()


@pytest.fixture
def toy_model():
    return ToyModel()


@pytest.fixture
def toy_loader(toy_dataset):
    return build_dataloader(toy_dataset, samples_per_gpu=8, workers_per_gpu=0, shuffle=True,
                            seed=0)


@pytest.fixture
def logger():
    log = logging.getLogger('mtrain.test')
    log.setLevel(logging.INFO)
    return log


@pytest.fixture
def make_runner(tmp_path, logger):
    """``make_runner(model, by_epoch=True, max=2, lr=0.1)`` → a runner with an SGD optimizer."""

    def factory(model=None, by_epoch=True, max_len=2, lr=0.1, momentum=0.0, **kwargs):
        model = model or ToyModel()
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
        cls = EpochBasedRunner if by_epoch else IterBasedRunner
        length = dict(max_epochs=max_len) if by_epoch else dict(max_iters=max_len)
        return cls(model, optimizer=optimizer, work_dir=str(tmp_path), logger=logger,
                   **length, **kwargs)

    return factory


@pytest.fixture(scope='session')
def cpu_fused():
    """Skip unless this torch has fused optimizers on the CPU (``fused=True``)."""
    p = nn.Parameter(torch.zeros(2))
    p.grad = torch.ones(2)
    try:
        torch.optim.SGD([p], lr=0.1, momentum=0.9, fused=True).step()
    except RuntimeError:  # (older torch: fused kernels on CUDA only)
        pytest.skip('this torch has no fused optimizers on the CPU')
