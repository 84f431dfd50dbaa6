"""A trial's command line and what is read back from its folder."""

import json
import sys

import pytest

from mtrain.config import load_config, parse_cfg_options
from mtrain.sweep import SweepSpec, loguniform
from mtrain.sweep.sweeper import Sweeper
from mtrain.sweep.trial import error_line, final_metric, literal, master_port, trial_command
from sweep_helpers import CONFIG


def test_the_command_carries_the_hook_the_fixed_options_and_exact_values(tmp_path):
    spec = SweepSpec(config=CONFIG, space_file='s.py', space={'optimizer.lr': loguniform(
        0.01, 0.1)}, work_dir=str(tmp_path), trials=3, study='s', metric='accuracy',
        direction='maximize', cfg_options=['runner.max_epochs=2'], seed=7)
    lr = 0.012345678901234567
    command = trial_command(spec, 3, str(tmp_path / 'trial_0003'), {'optimizer.lr': lr})
    assert command[command.index('--seed') + 1] == '7'
    options = parse_cfg_options(command[command.index('--cfg-options') + 1:])
    assert options['optimizer.lr'] == lr and options['runner.max_epochs'] == 2
    hook = options['custom_hooks'][-1]
    assert hook == dict(type='OptunaPruningHook', storage=f'sqlite:///{tmp_path}/sweep.db',
                        study_name='s', trial_number=3, monitor='accuracy', pruner='median',
                        pruner_args={})
    assert list(options)[-1] == 'custom_hooks'  # last: assembled after every other option


@pytest.mark.parametrize('config', [CONFIG, CONFIG.replace('.py', '_mmengine.py')])
def test_custom_hooks_on_the_command_line_keep_the_pruning_hook(config, tmp_path):
    """Issue 33 item 5: ``--cfg-options custom_hooks=[...]`` replaced the pruning hook."""
    spec = SweepSpec(config=config, space_file='s.py', space={}, work_dir=str(tmp_path),
                     trials=3, study='s', metric='accuracy', direction='maximize',
                     cfg_options=["custom_hooks=[dict(type='EMAHook', momentum=0.001)]"])
    command = trial_command(spec, 2, str(tmp_path / 'trial_0002'),
                            {'custom_hooks.0.momentum': 0.002})
    # What tools/train.py trains: the config with the trial's options, in mtrain's schema.
    cfg = load_config(config, parse_cfg_options(command[command.index('--cfg-options') + 1:]))
    hooks = {h['type']: h for h in cfg.custom_hooks}
    assert hooks['OptunaPruningHook']['trial_number'] == 2
    assert hooks['EMAHook']['momentum'] == 0.002
    assert [h['type'] for h in cfg.custom_hooks].count('ParamSchedulerHook') == (
        'mmengine' in config)


def test_literal_reads_back_as_the_same_value():
    value = [dict(type='X', a=[1, 2.5, None], b={'1': 'q'}, c=(1, ), d='a"b', e=True)]
    assert parse_cfg_options([f'k={literal(value)}'])['k'] == value


def test_the_metric_is_the_last_evaluation_over_every_log_of_a_resumed_trial(tmp_path):
    for name, values in (('20260101_000000', [0.5, 0.6]), ('20260101_000100', [0.7])):
        with open(tmp_path / f'{name}.log.json', 'w') as f:
            f.write(json.dumps({'mode': 'train', 'loss': 1.0}) + '\n')
            for v in values:
                f.write(json.dumps({'mode': 'val', 'accuracy': v}) + '\n')
    assert final_metric(str(tmp_path), 'accuracy') == 0.7
    assert final_metric(str(tmp_path), 'mAP') is None


def test_error_line_is_the_message_of_the_last_error_line(tmp_path):
    (tmp_path / 'train.out').write_text('$ python train.py\n[rank0]: error: bad key\nmore\n')
    assert error_line(str(tmp_path)) == 'bad key'
    assert error_line(str(tmp_path / 'none')) == 'no output'


def test_a_slurm_trial_is_an_srun_job_step_of_one_task_per_gpu(tmp_path):
    spec = SweepSpec(config=CONFIG, space_file='s.py', space={'optimizer.lr': loguniform(
        0.01, 0.1)}, work_dir=str(tmp_path), trials=3, study='s', metric='accuracy',
        direction='maximize', launcher='slurm', gpus_per_trial=16, partition='gpu',
        srun_args='--qos=high --time="2:00:00"', train_script='/x/tools/train.py')
    command = trial_command(spec, 3, str(tmp_path / 'trial_0003'), {'optimizer.lr': 0.05})
    # tools/slurm_train.sh's srun line: GPUS=16 (two nodes of 8), CPUS_PER_TASK=5
    assert command[:command.index(sys.executable)] == [
        'srun', '-p', 'gpu', '--job-name=s_trial_3', '--gres=gpu:8', '--ntasks=16',
        '--ntasks-per-node=8', '--cpus-per-task=5', '--kill-on-bad-exit=1', '--qos=high',
        '--time=2:00:00']
    train = command[command.index(sys.executable) + 1:]
    assert train[:3] == ['-u', '/x/tools/train.py', CONFIG]
    assert train[train.index('--launcher') + 1] == 'slurm'
    options = parse_cfg_options(train[train.index('--cfg-options') + 1:])
    assert options['optimizer.lr'] == 0.05
    spec.gpus_per_node, spec.cpus_per_task, spec.partition, spec.srun_args = 0, 2, None, ''
    assert trial_command(spec, 0, str(tmp_path), {})[:6] == [
        'srun', '--job-name=s_trial_0', '--ntasks=16', '--ntasks-per-node=8',
        '--cpus-per-task=2', '--kill-on-bad-exit=1']  # a CPU partition: no --gres


def test_each_slurm_trial_has_its_own_master_port_and_its_tasks_threads(tmp_path):
    spec = SweepSpec(config=CONFIG, space_file='s.py', space={}, work_dir=str(tmp_path),
                     trials=3, study='s', metric='accuracy', direction='maximize',
                     launcher='slurm', gpus_per_trial=2, cpus_per_task=3)
    sweeper = Sweeper(spec, study=None)
    envs = [sweeper._env(0, number) for number in range(3)]
    assert len({env['MASTER_PORT'] for env in envs}) == 3
    assert all(env['OMP_NUM_THREADS'] == '3' for env in envs)  # --cpus-per-task
    assert int(envs[0]['MASTER_PORT']) == master_port(spec, 0)
