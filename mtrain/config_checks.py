"""Checks of run settings that a config shows on its own, before anything is built.

``mtrain.config`` checks the shape of a config (typos, unknown keys); these
check what some values mean together, where a mistake would otherwise train
the wrong thing silently or fail late with a traceback:

- ``total_epochs`` next to a ``runner`` that says otherwise (mmdet 2.x's
  ``train_detector`` asserted they match; mtrain reads ``runner``);
- ``workflow`` written as one pair instead of a list of pairs;
- ``load_from`` / ``resume_from`` naming a directory (not a sharded checkpoint) or a URL;
- the dataset a ``('val', N)`` workflow phase reads (mmdet 2.x's rule).

Each raises :class:`ConfigError` naming the key and the fix.
"""

import copy
import glob
import os.path as osp
from typing import Any, Dict, Optional

from .utils.errors import ConfigError

_URL_SCHEMES = ('http://', 'https://', 's3://', 'gs://', 'hf://', 'modelscope://',
                'open-mmlab://', 'torchvision://', 'mmcls://', 'pavi://')


def check_run_settings(cfg: Any) -> None:
    """``total_epochs`` against ``runner``, and the shape of ``workflow``."""
    check_total_epochs(cfg)
    check_workflow_shape(cfg.get('workflow'))


def check_total_epochs(cfg: Any) -> None:
    """mmcv 1.x's legacy ``total_epochs`` must agree with ``runner.max_epochs`` when both are set.

    A base config's ``runner = dict(max_epochs=12)`` next to a child's
    ``total_epochs = 1`` trains 12 epochs: mtrain (like mmdet 2.x) reads
    ``runner``. mmdet 2.x asserted the two match; this says which to change.
    """
    total, runner = cfg.get('total_epochs'), cfg.get('runner')
    if total is None or not isinstance(runner, dict):
        return
    max_epochs = runner.get('max_epochs')
    if max_epochs is None and runner.get('max_iters') is not None:
        raise ConfigError(f"total_epochs={total} is set next to runner.max_iters="
                          f"{runner['max_iters']}; the runner counts iterations and "
                          'total_epochs is not read. Remove total_epochs.', key='total_epochs')
    if max_epochs is not None and max_epochs != total:
        raise ConfigError(f'total_epochs={total} disagrees with runner.max_epochs={max_epochs} '
                          '(mtrain trains runner.max_epochs, as mmdet 2.x did, which asserted '
                          f'they match). Set runner = dict(max_epochs={total}) and remove '
                          'total_epochs, or remove total_epochs to keep '
                          f'{max_epochs} epochs.', key='total_epochs')


def check_workflow_shape(workflow: Any) -> None:
    """``workflow`` is a list of ``(phase, epochs)`` pairs: ``[('train', 1)]``, not ``('train', 1)``."""
    if workflow is None:
        return
    example = "workflow = [('train', 1)] or [('train', 1), ('val', 1)]"
    if not isinstance(workflow, (list, tuple)) or not workflow:
        raise ConfigError(f'workflow must be a list of (phase, epochs) pairs, got {workflow!r}; '
                          f'write {example}', key='workflow')
    if isinstance(workflow[0], str):
        pairs = list(zip(workflow[::2], workflow[1::2]))
        raise ConfigError(f'workflow is one pair {tuple(workflow)!r}, not a list of pairs; '
                          f'write workflow = {pairs!r} (mind the square brackets)',
                          key='workflow')
    for i, flow in enumerate(workflow):
        if not (isinstance(flow, (list, tuple)) and len(flow) == 2 and isinstance(flow[0], str)
                and isinstance(flow[1], int)):
            raise ConfigError(f'workflow[{i}] is {flow!r}; each entry is a (phase, epochs) pair '
                              f'such as (\'train\', 1). Write {example}', key='workflow')


def check_checkpoint_path(path: Any, key: str) -> None:
    """``load_from`` / ``resume_from`` must name a local checkpoint file (or sharded folder).

    A directory exists but is not a checkpoint (the message lists the files
    in it); a URL is not downloaded by mtrain (the message gives the command).
    """
    if path is None:
        return
    if not isinstance(path, str):
        raise ConfigError(f'{key} must be the path of a checkpoint file, got {path!r}', key=key)
    if path.startswith(_URL_SCHEMES):
        name = osp.basename(path.split('?', 1)[0]) or 'checkpoint.pth'
        fetch = (f'wget -P checkpoints {path}' if path.startswith(('http://', 'https://'))
                 else 'your storage client (e.g. `aws s3 cp`, `gsutil cp`)')
        raise ConfigError(f'{key} is a URL ({path}); mtrain loads local files only. Download '
                          f'it first with {fetch}, then set {key}=checkpoints/{name}', key=key)
    # (a sharded checkpoint is a folder with DCP's index: mtrain.runner.sharded_checkpoint)
    if osp.isdir(path) and not osp.isfile(osp.join(path, '.metadata')):
        found = sorted(osp.basename(p) for p in glob.glob(osp.join(path, '*.pth')))
        listed = (f"; it holds {', '.join(found[:6])}{', ...' if len(found) > 6 else ''}"
                  if found else '; it holds no .pth file')
        latest = osp.join(path, 'latest.pth')
        hint = (f" (e.g. {key}={latest}, or --auto-resume --work-dir {path} to continue the "
                'newest valid one)') if osp.exists(latest) else ''
        raise ConfigError(f'{key}={path} is a directory, not a checkpoint file{listed}. Name '
                          f'one file{hint}', key=key)


def val_phase_dataset(data: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The dataset config a ``('val', N)`` workflow phase reads: mmdet 2.x's rule.

    mmdet 2.x's ``tools/train.py`` built the val phase from a copy of
    ``data.val`` with the **train** pipeline (a loss needs labels, which a
    test-mode pipeline drops). Same here when both have a ``pipeline``;
    otherwise ``data.val`` as it is. Returns None without ``data.val``.
    """
    val, train = data.get('val'), data.get('train')
    if not isinstance(val, dict):
        return val
    val = copy.deepcopy(dict(val))
    if isinstance(train, dict) and 'pipeline' not in train:
        train = train.get('dataset')  # RepeatDataset & co.: the wrapped dataset's pipeline
    if isinstance(train, dict) and 'pipeline' in train and 'pipeline' in val:
        val['pipeline'] = copy.deepcopy(train['pipeline'])
    return val
