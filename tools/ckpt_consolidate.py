"""Turn a sharded checkpoint into one ordinary file, or a file into a sharded checkpoint.

::

    python tools/ckpt_consolidate.py work_dirs/run/epoch_12.pth epoch_12_whole.pth
    python tools/ckpt_consolidate.py epoch_12_whole.pth epoch_12_sharded.pth

The direction follows the source: a sharded checkpoint's folder (what
``checkpoint_config = dict(sharded=True)`` writes; on by default under FSDP)
becomes one file that ``torch.load`` and mmcv 1.x's ``load_checkpoint`` read,
with every rank's RNG and data position kept, so a run also resumes from it;
a file becomes a folder that resumes on any number of ranks. Either form
works for ``tools/test.py``, ``load_from`` and ``resume_from`` as it is; this
is for sharing one file, or for another tool that reads files only.

The whole state is held in this one process (weights and optimizer: about
the size of the folder). The optimizer state stays keyed by parameter name,
as a sharded checkpoint keeps it; a file whose optimizer state is keyed by
index (from an unsharded run) has no names for it: convert it with
``--weights-only``, or resume from the file itself.
"""

import argparse
import os.path as osp
import shutil
import sys
from typing import List, Optional

from mtrain.runner import CheckpointError, load_checkpoint_file
from mtrain.runner.checkpoint import finish_sharded, save_checkpoint_file
from mtrain.runner.sharded_checkpoint import (SHARDED_KEYS, is_sharded, keyed_by_name,
                                              write_whole)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='A sharded checkpoint (folder) to one file, '
                                     'or one file to a sharded checkpoint.')
    parser.add_argument('src', help='a sharded checkpoint folder, or a checkpoint file')
    parser.add_argument('dst', help='the file (or folder) to write; must not exist')
    parser.add_argument('--weights-only', action='store_true',
                        help='leave the optimizer state out')
    parser.add_argument('--trust-checkpoint', action='store_true',
                        help='allow pickled objects other than tensors in the source')
    return parser.parse_args(argv)


def to_file(src: str, dst: str, weights_only: bool = False, trusted: bool = False) -> None:
    """The sharded checkpoint ``src`` as one ordinary checkpoint file ``dst``."""
    keys = ['state_dict'] if weights_only else None
    ckpt = load_checkpoint_file(src, trusted=trusted, keys=keys)
    ckpt.pop('sharded', None)
    save_checkpoint_file(ckpt, dst)


def to_sharded(src: str, dst: str, weights_only: bool = False, trusted: bool = False) -> None:
    """The checkpoint file ``src`` as a (one-rank) sharded checkpoint folder ``dst``."""
    ckpt = load_checkpoint_file(src, trusted=trusted)
    if weights_only:
        ckpt.pop('optimizer', None)
    if 'optimizer' in ckpt and not _named(ckpt['optimizer']):
        raise CheckpointError(f"{src}: its optimizer state is keyed by parameter index (written "
                              'by an unsharded run), and a sharded checkpoint keys it by name, '
                              'which the file does not hold. Convert it with --weights-only, '
                              'or resume from the file itself.')
    tensors = {key: ckpt.pop(key) for key in SHARDED_KEYS if key in ckpt}
    ckpt['sharded'] = dict(keys=sorted(tensors), world_size=1)
    stage = f'{dst}.tmp-convert'
    shutil.rmtree(stage, ignore_errors=True)
    write_whole(tensors, stage)
    finish_sharded(stage, ckpt, dst)


def _named(optimizer_state) -> bool:
    """Keyed by name (a dict of optimizers: each of them)."""
    if 'param_groups' in optimizer_state:
        return keyed_by_name(optimizer_state)
    return all(_named(state) for state in optimizer_state.values())


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    try:
        if osp.lexists(args.dst):
            raise CheckpointError(f'{args.dst} exists; name a new file or folder')
        convert = to_file if is_sharded(args.src) else to_sharded
        convert(args.src, args.dst, args.weights_only, args.trust_checkpoint)
    except CheckpointError as e:
        print(f'error: {e}', file=sys.stderr)
        return 1
    kind = 'file' if convert is to_file else 'sharded checkpoint'
    print(f'wrote {args.dst} ({kind}) from {args.src}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
