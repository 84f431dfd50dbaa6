"""``tools/train.py --check-config``: one batch through the model in each mode, no update.

The preflight checks (:mod:`.preflight`) look at the built objects; a
mistake in the user's own ``forward`` / ``train_step`` (no loss, a float
loss, no ``num_samples``, losses instead of predictions in eval mode) only
shows when the model runs. This runs the batch processor on the first train
batch (no backward, no optimizer step) and the evaluation's first val batch,
so ``--check-config`` reports it before training. A real run meets the same
mistakes at its first iteration and its first evaluation (the same checks).
What ``dataset.evaluate`` returns is checked at the first evaluation (it
needs the whole val set).
"""

from typing import Any, List, Tuple

import torch

from ..hooks import EvalHook
from ..hooks.eval_checks import eval_predictions
from ..evaluation.inference import uses_mmcv_contract
from .base_runner import BaseRunner


def dry_run(runner: BaseRunner, loaders: List[Any], workflow: List[Tuple[str, int]]) -> List[str]:
    """Run one train batch and one val batch; return what ran, for a one-line report."""
    ran = []
    model, processor = runner.model, runner.batch_processor
    was_training = model.training
    try:
        train_loader = loaders[[mode for mode, _ in workflow].index('train')]
        if not getattr(processor, 'does_backward', False):  # it would back-propagate
            model.train()
            with torch.no_grad():
                runner.run_iter(next(iter(train_loader)), train_mode=True)
            runner.log_buffer.clear()
            ran.append('one train batch (no update)')
        eval_hook = next((h for h in runner.hooks if isinstance(h, EvalHook)), None)
        if eval_hook is not None and not eval_hook.custom_test_fn \
                and not uses_mmcv_contract(model):
            model.eval()
            with torch.no_grad():
                out = processor(runner, next(iter(eval_hook.dataloader)), train_mode=False)
            eval_predictions(out, model)
            ran.append('one val batch')
    finally:
        model.train(was_training)
    return ran

