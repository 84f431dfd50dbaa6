"""mmcv 1.7.2's compiled ops (``mmcv._ext``) on PyTorch and torchvision.

mmcv-full 1.x has no build for torch 2.x; its Python wrappers (``mmcv/ops/*.py``:
``batched_nms``, ``RoIAlign``, the focal-loss ``Function`` s, ...) only call
``ext_module.<name>(...)`` with the signatures of
``mmcv/ops/csrc/pytorch/pybind.cpp``. This package implements those entry
points, so mmcv's own wrappers run unchanged and keep their exact semantics
(offsets, ``split_thr``, autograd, ``aligned``/``pool_mode``). The import
route serves it as ``mmcv._ext`` when mmcv has no compiled ops
(:mod:`mtrain.compat.mmcv`).

Layout (one small module per op family)::

    ops/__init__.py      this docstring; OP_MODULES; entry_points() merges the tables
    ops/ext.py           ExtModule, the module served as ``mmcv._ext``: looks names up
                         in entry_points(), records which ops a run called
                         (served / report()), and gives a stub for an op not
                         implemented that raises one line at its first call
    ops/<family>.py      ENTRY_POINTS = {'<pybind name>': function, ...}

To add an op family: write ``ops/<family>.py`` with a module-level dict
``ENTRY_POINTS`` mapping mmcv's pybind names (exactly as in pybind.cpp) to
functions taking the same arguments (positional and keyword, as mmcv's
wrappers pass them; out-params are tensors filled in place with ``copy_``),
and put ``'<family>'`` in :data:`OP_MODULES` (listed in advance below; a listed
module that does not exist yet is skipped, its ops raising the one-line
error), and list mmcv's test file for it in ``TEST_FILES`` of
tools/mmcv_op_tests.py. A name defined by two modules is an error. Each function dispatches on
its tensors' device and dtype itself (CPU and CUDA; fp32, fp64 and the half
types where mmcv's kernels take them).

Nothing here is imported until ``mmcv._ext`` is first used: torchvision and
the op modules load then, not when the route is enabled.
"""

import importlib
from typing import Callable, Dict

#: The op-family modules merged into ``mmcv._ext`` (names under this package).
OP_MODULES = (
    'nms',              # nms, nms_match
    'soft_nms',         # softnms
    'roi_align',        # roi_align_forward/backward
    'focal_loss',       # sigmoid/softmax_focal_loss_forward/backward
    'roi_pool',         # roi_pool_forward/backward
    'deform_roi_pool',  # deform_roi_pool_forward/backward
    'deform_conv',      # deform_conv_* (ops2)
    'modulated_deform_conv',  # modulated_deform_conv_* (ops2)
    'ms_deform_attn',   # ms_deform_attn_forward/backward (ops2)
    'carafe',           # carafe_*, carafe_naive_* (ops2)
    'masked_conv',      # masked_im2col_forward, masked_col2im_forward (ops2)
    'sync_bn',          # sync_bn_* (ops2)
    'rotated_iou',      # box_iou_rotated, nms_rotated (ops3)
    'roi_align_rotated',  # roi_align_rotated_forward/backward (ops3)
)

_table: Dict[str, Callable] = {}


def entry_points() -> Dict[str, Callable]:
    """All implemented entry points, ``{pybind name: function}``, merged once."""
    if not _table:
        merged: Dict[str, Callable] = {}
        for family in OP_MODULES:
            name = f'{__name__}.{family}'
            try:
                module = importlib.import_module(name)  # lazily: see the docstring
            except ModuleNotFoundError as e:
                if e.name != name:
                    raise
                continue  # listed ahead of its module: its ops stay unimplemented
            for op, fn in module.ENTRY_POINTS.items():
                assert op not in merged, f'[compat.ops] {op} is defined twice ({name})'
                merged[op] = fn
        _table.update(merged)
    return _table
