"""EvalHook.test_fn defaults to mmcv.engine's functions, which 1.x eval hooks call themselves."""

import pytest
import torch
from torch import nn

from conftest import ToyDataset
from mtrain.datasets import build_dataloader
from mtrain.evaluation import (collect_results_cpu, collect_results_gpu, multi_gpu_test,
                               single_gpu_test)
from mtrain.hooks import DistEvalHook, EvalHook, OptimizerHook


class ScoredToy(ToyDataset):
    """Toy data scored on per-sample class indices (mmcv's per-sample results)."""

    def evaluate(self, results, logger=None, **kwargs):
        assert isinstance(results, list) and len(results) == len(self)
        hits = [int(r) == int(y) for r, y in zip(results, self.y)]
        return {'accuracy': sum(hits) / len(hits)}


class OneXClassifier(nn.Module):
    """An mmcls-0.x-shaped model with no train_step: ``forward(img, return_loss=True, **kw)``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 3)
        self.test_calls = []

    def forward(self, img, return_loss=True, **kwargs):
        logits = self.fc(img)
        if return_loss:
            return {'loss': nn.functional.cross_entropy(logits, kwargs['gt_label'])}
        self.test_calls.append(sorted(kwargs))
        return list(logits.argmax(1).numpy())  # one result per sample


class MmclsStyleEvalHook(EvalHook):
    """What mmcls 0.25's EvalHook does: call ``self.test_fn`` itself."""

    def _do_evaluate(self, runner):
        results = self.test_fn(runner.model, self.dataloader)
        self.latest_results = results
        runner.log_buffer.output['eval_iter_num'] = len(self.dataloader)
        key_score = self.evaluate(runner, results)
        if self.save_best and key_score:
            self._save_ckpt(runner, key_score)


def _val_loader():
    return build_dataloader(ScoredToy(n=20), 8, 0, shuffle=False)


def test_test_fn_defaults_to_mmcv_engine_functions():
    assert EvalHook(_val_loader()).test_fn is single_gpu_test
    assert DistEvalHook(_val_loader()).test_fn is multi_gpu_test
    mine = lambda model, loader: []  # noqa: E731
    assert EvalHook(_val_loader(), test_fn=mine).test_fn is mine


def test_a_1x_eval_hook_calling_test_fn_scores_a_model_without_train_step(make_runner):
    model = OneXClassifier()
    runner = make_runner(model=model, max_len=2)
    hook = MmclsStyleEvalHook(_val_loader(), save_best='accuracy')
    runner.register_hook(OptimizerHook())
    runner.register_hook(hook, 'LOW')
    train = build_dataloader(ToyDataset(n=16), 8, 0, shuffle=False)
    runner.run([train], [('train', 1)])
    # model(return_loss=False, **data): the batch's other keys, no return_loss among them.
    assert model.test_calls and all(c == ['gt_label'] for c in model.test_calls)
    assert len(hook.latest_results) == 20
    expected = sum(int(r) == int(y) for r, y in zip(hook.latest_results, ScoredToy(n=20).y)) / 20
    assert runner.eval_results == {'accuracy': expected}
    assert runner.meta['hook_msgs']['best_score'] == expected


def _one_epoch_evaluated(make_runner, model):
    runner = make_runner(model=model, max_len=1)
    runner.register_hook(OptimizerHook())
    runner.register_hook(EvalHook(_val_loader()), 'LOW')
    runner.run([build_dataloader(ToyDataset(n=16), 8, 0, shuffle=False)], [('train', 1)])
    return runner


def test_default_inference_of_the_plain_hook_calls_the_model_in_eval_mode(make_runner):
    model = OneXClassifier()
    runner = _one_epoch_evaluated(make_runner, model)
    assert len(model.test_calls) == 3 and 'accuracy' in runner.eval_results


def test_collect_functions_in_one_process_keep_dataset_order():
    assert collect_results_cpu([1, 2, 3, 4], 3) == [1, 2, 3]
    assert collect_results_gpu([1, 2, 3], 3) == [1, 2, 3]


class KwargsModel(OneXClassifier):
    """mmcv 1.7.2's own test model: ``return_loss`` arrives through ``**kwargs``."""

    def forward(self, img, **kwargs):
        if kwargs.pop('return_loss', True):
            return {'loss': nn.functional.cross_entropy(self.fc(img), kwargs['gt_label'])}
        self.test_calls.append(sorted(kwargs))
        return list(self.fc(img).argmax(1).numpy())

    def train_step(self, data_batch, optimizer, **kwargs):
        loss = self(**data_batch)['loss']
        return dict(loss=loss, log_vars=dict(loss=loss.item()), num_samples=len(data_batch['img']))


def test_a_model_taking_return_loss_through_kwargs_is_evaluated_as_mmcv_does(make_runner):
    model = KwargsModel()
    runner = _one_epoch_evaluated(make_runner, model)
    assert model.test_calls == [['gt_label']] * 3  # model(return_loss=False, **data)
    results = [int(r) for b in _val_loader() for r in model.fc(b['img']).argmax(1)]
    expected = sum(r == int(y) for r, y in zip(results, ScoredToy(n=20).y)) / 20
    assert runner.eval_results == {'accuracy': expected}


@pytest.mark.parametrize('loader', [[_val_loader()], ScoredToy(n=4)])
def test_an_eval_hook_given_no_loader_says_so_as_a_type_error(loader):
    """mmcv 1.7.2: ``TypeError`` for anything but a DataLoader (its own test passes a list)."""
    with pytest.raises(TypeError, match=f'EvalHook evaluates one DataLoader, but got a '
                                        f'{type(loader).__name__}'):
        EvalHook(loader)
    with pytest.raises(TypeError, match='DistEvalHook evaluates one DataLoader'):
        DistEvalHook(loader, interval=-1)  # checked first, as mmcv
