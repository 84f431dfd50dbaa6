"""ProfilerHook: a window of iterations, named sections, a trace Chrome/TensorBoard open."""

import collections
import json
import os

import pytest
import torch

from mtrain.hooks import IterTimerHook, OptimizerHook, ProfilerHook
from mtrain.hooks.profiler import SECTIONS


def _trace_sections(path):
    with open(path) as f:
        trace = json.load(f)  # the Chrome trace format: {"traceEvents": [...]}
    names = [e.get('name') for e in trace['traceEvents'] if e.get('ph') == 'X']
    return collections.Counter(n for n in names if n in SECTIONS), names


def test_window_of_three_iterations_with_named_sections(make_runner, toy_loader, tmp_path):
    runner = make_runner(max_len=2)  # 16 iterations
    runner.register_hook(OptimizerHook())
    runner.register_hook(IterTimerHook(), 'LOW')
    hook = ProfilerHook(start=5, num_iters=3, row_limit=5)
    runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])

    assert os.path.dirname(hook.trace_path) == str(tmp_path / 'profiler')
    assert hook.trace_path.endswith('.pt.trace.json')  # TensorBoard's profiler plugin layout
    sections, names = _trace_sections(hook.trace_path)
    assert sections == {name: 3 for name in SECTIONS}
    assert any(n.startswith('aten::linear') or n == 'aten::addmm' for n in names)  # the ops
    # No profiler is left running once the window is over.
    with torch.profiler.profile() as prof:
        torch.ones(1) + 1
    assert prof.key_averages()


def test_run_ending_inside_the_window_still_writes_the_trace(make_runner, toy_loader, tmp_path):
    runner = make_runner(max_len=1)  # 8 iterations; the window asks for 6..15
    runner.register_hook(OptimizerHook())
    hook = ProfilerHook(start=6, num_iters=10, out_dir=str(tmp_path / 'p'), row_limit=0)
    runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    sections, _ = _trace_sections(hook.trace_path)
    assert sections['forward'] == 2 and sections['optimizer_step'] == 2


def test_start_at_zero_profiles_the_first_batch_too(make_runner, toy_loader, tmp_path):
    runner = make_runner(max_len=1, by_epoch=False)
    runner._max_iters = 4
    runner.register_hook(OptimizerHook())
    hook = ProfilerHook(start=0, num_iters=2, row_limit=0)
    runner.register_hook(hook)
    runner.run([toy_loader], [('train', 1)])
    sections, _ = _trace_sections(hook.trace_path)
    assert sections == {name: 2 for name in SECTIONS}


@pytest.mark.parametrize('kwargs, match', [
    (dict(start=-1), 'start must be'), (dict(num_iters=0), 'num_iters must be'),
    (dict(activities=['gpu']), "activities are 'cpu' and 'cuda'")])
def test_bad_arguments_say_what_is_expected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ProfilerHook(**kwargs)
