"""Start-up stays lean: what a digits run does not need is never imported.

Runs in a fresh interpreter (this test process has imported everything already).
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONAL = ('tensorboard', 'matplotlib', 'torchvision', 'sklearn', 'scipy',
            'wandb', 'mlflow', 'neptune', 'dvclive', 'clearml')  # tracker clients

SCRIPT = r'''
import json, runpy, sys
OPTIONAL = {optional!r}

def loaded():
    return sorted({{m.split('.')[0] for m in sys.modules}} & set(OPTIONAL))

stages = {{}}
import mtrain, mtrain.config, mtrain.runner, mtrain.hooks, mtrain.optim  # noqa: E401
import mtrain.datasets, mtrain.models, mtrain.processors, mtrain.evaluation  # noqa: E401
stages['import'] = loaded()
from mtrain.hooks import ProfilerHook, ProgressBarHook, TensorboardLoggerHook
TensorboardLoggerHook(), ProgressBarHook(), ProfilerHook()
from mtrain.hooks import (ClearMLLoggerHook, DvcliveLoggerHook, MlflowLoggerHook,
                          NeptuneLoggerHook, WandbLoggerHook)
for tracker in (ClearMLLoggerHook, DvcliveLoggerHook, MlflowLoggerHook, NeptuneLoggerHook,
                WandbLoggerHook):
    try:
        tracker()  # looks the client up, imports nothing
    except ValueError:  # the client is not installed here
        pass
stages['hooks built'] = loaded()
train = runpy.run_path('tools/train.py', run_name='train')
code = train['main'](['configs/digits/lenet_digits.py', '--work-dir', {work_dir!r},
                      '--cfg-options', 'runner.max_epochs=1', 'data.samples_per_gpu=512'])
stages['digits trained'] = loaded()
print(json.dumps(dict(stages, code=code)))
'''


@pytest.mark.slow  # a fresh interpreter imports torch and trains: seconds
def test_a_digits_run_imports_no_optional_library(tmp_path):
    script = SCRIPT.format(optional=OPTIONAL, work_dir=str(tmp_path))
    result = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    stages = json.loads(result.stdout.strip().splitlines()[-1])
    assert stages['code'] == 0
    assert stages['import'] == [] and stages['hooks built'] == []
    # The digits data is read from scikit-learn's data file without importing scikit-learn.
    assert stages['digits trained'] == []
