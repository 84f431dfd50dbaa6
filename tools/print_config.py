"""Print the merged config: ``python tools/print_config.py CONFIG [--cfg-options k=v ...]``.

Shows what ``tools/train.py`` would read after ``_base_`` inheritance,
``_delete_`` and ``--cfg-options``, as a Python config (which itself loads
again) or as JSON. The config is checked the same way training checks it, so
a typo fails here with the same message.
"""

import argparse
import json
import sys

from mtrain.config import load_config, parse_cfg_options
from mtrain.utils import ConfigError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Print the merged config.')
    parser.add_argument('config', help='config file path')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='override config keys, as in tools/train.py')
    parser.add_argument('--format', choices=['py', 'json'], default='py',
                        help='a Python config (default) or JSON')
    return parser.parse_args(argv)


def render(config: str, cfg_options, fmt: str = 'py') -> str:
    """The merged config ``config`` with ``cfg_options`` applied, as text."""
    cfg = load_config(config, parse_cfg_options(cfg_options))
    if fmt == 'json':
        return json.dumps(cfg.to_dict(), indent=2, default=str)
    return cfg.pretty_text


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        text = render(args.config, args.cfg_options, args.format)
    except ConfigError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
