"""``load_tool('train')``: a script in tools/ as a module, to call its ``main(argv)`` in-process."""

import importlib.util
import os.path as osp

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def load_tool(name: str):
    """tools/NAME.py as a fresh module (each call executes the script again)."""
    spec = importlib.util.spec_from_file_location(f'tools_{name}',
                                                  osp.join(ROOT, 'tools', f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
