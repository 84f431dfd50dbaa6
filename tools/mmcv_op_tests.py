"""Run mmcv 1.7.2's own op tests, unmodified, against mtrain's ``mmcv._ext`` (via the route).

mmcv's ``tests/test_ops/`` hold hard-coded expected outputs and gradients.
This exports them from an mmcv git checkout into a directory OUTSIDE the
repository (their code never enters it) and runs pytest on the files of the
ops mtrain implements, in a Python that has pure-Python mmcv 1.7.2 installed,
with the import route enabled first (so ``mmcv._ext`` is
:mod:`mtrain.compat.ops`). It prints pytest's summary and the ops called::

    python tools/mmcv_op_tests.py --python /work/venv-mmcv/bin/python \\
        --mmcv-git /work/.mirror/open-mmlab+mmcv/repo      # all implemented ops
    python tools/mmcv_op_tests.py ... nms roi_align        # some of them

``--mmcv-git`` is a clone of github.com/open-mmlab/mmcv (bare is fine); the
tests are read at ``--tag`` (v1.7.2). Exit status: pytest's.
"""

import argparse
import os
import os.path as osp
import subprocess
import sys
import tempfile

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
#: mmcv's test file(s) for each op family mtrain implements.
TEST_FILES = {
    'nms': ['test_nms.py'],
    'roi_align': ['test_roi_align.py'],
    'focal_loss': ['test_focal_loss.py'],
    'roi_pool': ['test_roi_pool.py'],
    'deform_roi_pool': ['test_deform_roi_pool.py'],
    'deform_conv': ['test_deform_conv.py'],
    'modulated_deform_conv': ['test_modulated_deform_conv.py'],
    'ms_deform_attn': ['test_ms_deformable_attn.py'],
    'carafe': ['test_carafe.py'],
    'masked_conv': ['test_masked_conv2d.py'],
    'sync_bn': ['test_syncbn.py'],
    'rotated_iou': ['test_box_iou_rotated.py', 'test_nms_rotated.py'],
    'roi_align_rotated': ['test_roi_align_rotated.py'],
}
#: Run in the child: the route first, then pytest; the ops called are printed at the end.
CHILD = '''
import sys
from mtrain.compat import mmcv as route
route.enable()
import pytest
from mtrain.compat.ops import ext
code = pytest.main(sys.argv[1:])
print('mmcv ops called:', *ext.report() or ['none'], sep='\\n  ')
sys.exit(code)
'''


def export(mmcv_git: str, tag: str, into: str) -> str:
    """mmcv's ``tests/test_ops`` (and the ``tests/data`` they read) at ``tag``, under ``into``."""
    archive = subprocess.run(['git', '--git-dir', mmcv_git, 'archive', tag, 'tests/test_ops',
                              'tests/data'], check=True, capture_output=True).stdout
    subprocess.run(['tar', '-x', '-C', into], input=archive, check=True)
    return osp.join(into, 'tests', 'test_ops')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('ops', nargs='*', help=f'op families (default all: {sorted(TEST_FILES)})')
    parser.add_argument('--python', default=sys.executable, help='a Python with mmcv 1.7.2')
    parser.add_argument('--mmcv-git', required=True, help='git dir of an mmcv clone')
    parser.add_argument('--tag', default='v1.7.2')
    parser.add_argument('-k', default=None, help="pytest's -k")
    parser.add_argument('-v', '--verbose', action='store_true', help='one line per test')
    args = parser.parse_args()
    unknown = sorted(set(args.ops) - set(TEST_FILES))
    if unknown:
        parser.error(f'no mmcv tests listed for {unknown}; known: {sorted(TEST_FILES)}')
    with tempfile.TemporaryDirectory(prefix='mmcv-tests-') as tmp:
        tests = export(args.mmcv_git, args.tag, tmp)
        files = [osp.join(tests, f) for op in args.ops or TEST_FILES for f in TEST_FILES[op]]
        cmd = [args.python, '-c', CHILD, '-v' if args.verbose else '-q', '-p', 'no:cacheprovider',
               '-rs', *files]
        if args.k:
            cmd += ['-k', args.k]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [REPO, *filter(None, [os.environ.get('PYTHONPATH')])]))
        return subprocess.run(cmd, cwd=tmp, env=env).returncode


if __name__ == '__main__':
    sys.exit(main())
