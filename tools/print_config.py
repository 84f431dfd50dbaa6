"""Print the merged config: ``python tools/print_config.py CONFIG [--cfg-options k=v ...]``.

Shows what ``tools/train.py`` would read after ``_base_`` inheritance,
``_delete_`` and ``--cfg-options``, as a Python config (which itself loads
again) or as JSON. The config is checked the same way training checks it, so
a typo fails here with the same message. ``--explain`` lists, for every key,
which ``_base_`` file or ``--cfg-options`` flag set it.
"""

import argparse
import json
import os
import sys

from mtrain.config import load_config, parse_cfg_options
from mtrain.config_sources import config_sources, format_sources
from mtrain.utils import ConfigError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Print the merged config.')
    parser.add_argument('config', help='config file path')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='override config keys, as in tools/train.py')
    parser.add_argument('--format', choices=['py', 'json'], default='py',
                        help='a Python config (default) or JSON')
    parser.add_argument('--explain', action='store_true',
                        help='for each key, the file or --cfg-options flag that set it')
    return parser.parse_args(argv)


def render(config: str, cfg_options, fmt: str = 'py') -> str:
    """The merged config ``config`` with ``cfg_options`` applied, as text."""
    cfg = load_config(config, parse_cfg_options(cfg_options))
    if fmt == 'json':
        return json.dumps(cfg.to_dict(), indent=2, default=str)
    return cfg.pretty_text


def explain(config: str, cfg_options) -> str:
    """Each leaf key of the merged config and the file or flag that set it."""
    options = parse_cfg_options(cfg_options)
    load_config(config, options)  # the same checks as training, first
    return format_sources(config_sources(config, options), root=os.getcwd())


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        text = (explain(args.config, args.cfg_options) if args.explain
                else render(args.config, args.cfg_options, args.format))
    except ConfigError as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
