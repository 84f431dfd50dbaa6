"""Convert a config between the mmcv 1.x and mmengine schemas, with a report.

    python tools/convert_config.py configs/digits/lenet_digits.py --to mmengine --out x.py
    python tools/convert_config.py my_mmengine_cfg.py --to mmcv --allow-lossy

The report lists every key: translated exactly, translated with a note, or
lossy (no counterpart, or a changed meaning, with the reason). A lossy
conversion exits 1 unless ``--allow-lossy``; the output is written either way.
"""

import argparse
import os.path as osp
import sys

from mmengine.config import Config

from mtrain.config import check_bases, check_config
from mtrain.config_convert import convert, detect_schema
from mtrain.utils import ConfigError


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='config file, either schema (_base_ is resolved)')
    parser.add_argument('--to', required=True, choices=['mmengine', 'mmcv'],
                        help='the schema to write')
    parser.add_argument('--out', help='where to write the converted config (default: stdout)')
    parser.add_argument('--allow-lossy', action='store_true',
                        help='exit 0 even when something could not be carried over exactly')
    parser.add_argument('--metric-class', action='append', default=[], metavar='NAME=TYPE',
                        help='to mmengine: the registered metric class that computes the 1.x '
                        "metric NAME (e.g. mAP=MyBoxAP); repeatable")
    return parser.parse_args(argv)


def metric_classes(pairs) -> dict:
    """``['mAP=MyBoxAP']`` → ``{'mAP': 'MyBoxAP'}``; a malformed pair is a ConfigError."""
    out = {}
    for pair in pairs:
        name, sep, kind = pair.partition('=')
        if not (sep and name and kind):
            raise ConfigError(f'--metric-class {pair!r}: expected NAME=TYPE, e.g. mAP=MyBoxAP')
        out[name] = kind
    return out


def read_config(path: str) -> Config:
    """The config with ``_base_`` resolved, its ``custom_imports`` not imported.

    Converting changes keys, not objects, so the project's modules need not be
    importable here (a converter run on another machine, or before the project
    is installed). mmcv-schema keys are checked for typos as ``tools/train.py`` does.
    """
    if not osp.isfile(path):
        raise ConfigError(f'config file {path} does not exist; check the path', filename=path)
    check_bases(path)
    try:
        cfg = Config.fromfile(path, import_custom_modules=False)
    except SyntaxError as e:
        raise ConfigError(f'Python syntax error at line {e.lineno}: {e.msg}',
                          filename=path) from e
    except Exception as e:  # mmengine raises bare Exception/KeyError for several cases
        raise ConfigError(f'cannot read the config: {type(e).__name__}: {e}',
                          filename=path) from e
    if detect_schema(cfg) == 'mmcv':
        check_config(cfg, path)
    return cfg


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        converted, report = convert(read_config(args.config).to_dict(), args.to,
                                    metric_classes(args.metric_class))
    except ConfigError as e:
        print(f'error: {e.with_file(args.config)}', file=sys.stderr)
        return 2
    except ValueError as e:
        print(f'error: {args.config}: {e}', file=sys.stderr)
        return 2
    text = Config(converted).pretty_text
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
    else:
        print(text)
    print(report.format(), file=sys.stderr)
    if report.is_lossy and not args.allow_lossy:
        print(f'error: {len(report.lossy_entries)} key(s) could not be converted exactly (see '
              'above); pass --allow-lossy to accept the nearest translation', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
