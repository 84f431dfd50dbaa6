"""Every parameter's lr, weight decay and momentum, and the rule that decided them.

``python tools/explain_optimizer.py CONFIG [--cfg-options k=v ...] [--json]``

Builds the config's model (on the CPU, no data) and its optimizer exactly as
training does, then prints one row per parameter: the param group it landed
in, the group's ``lr``, ``weight_decay`` and ``momentum`` (``betas[0]`` for
Adam-style optimizers), and the ``paramwise_cfg`` rule that decided them
(``custom_keys:<key>``, ``bias``, ``norm``, ``dwconv``, ``dcn_offset``,
``flat`` (mmengine's rules), ``frozen``, ``duplicate`` or ``default``). Any
constructor the config names is used as training uses it: a subclass that
overrides ``add_params`` shows ``<Class>.add_params`` for the groups it made
itself, and a constructor with its own ``__call__`` shows its name. The values are
those the optimizer
starts with; an LR schedule scales them during training (warmup starts at
``warmup_ratio`` times them). Parameters with equal settings share one param
group, so the group column repeats.

Warnings follow the table: a ``custom_keys`` entry that matches no parameter
name (training only warns, as mmcv; it is often a typo) and one that a longer
key always overrides. The exit status is 1 when a custom key matches nothing,
else 0, so a CI step can catch the typo.
"""

import argparse
import copy
import json
import logging
import sys
from typing import Any, Dict, List, Tuple

from torch import nn

from mtrain.config import load_config, parse_cfg_options
from mtrain.optim import DefaultOptimizerConstructor, build_optimizer_constructor, unwrap_model
from mtrain.optim.builder import DEFAULT_CONSTRUCTOR, is_optimizers_dict
from mtrain.optim.param_groups import unused_key_message
from mtrain.registry import MODELS, build
from mtrain.utils import ConfigError

COLUMNS = ('group', 'name', 'shape', 'lr', 'weight_decay', 'momentum', 'rule')


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Explain the optimizer\'s param groups.')
    parser.add_argument('config', help='config file path')
    parser.add_argument('--cfg-options', nargs='+', default=[], metavar='KEY=VALUE',
                        help='override config keys, as in tools/train.py')
    parser.add_argument('--json', action='store_true', help='rows and warnings as JSON')
    return parser.parse_args(argv)


def explain(cfg) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The rows of the table and the warnings, for a loaded config.

    The optimizer is built by the constructor the config names, exactly as in
    training; a ``DefaultOptimizerConstructor`` (or subclass) says per
    parameter which rule decided it, any other constructor is shown by name.
    """
    model = unwrap_model(build(cfg.model, MODELS, 'model'))
    optimizer_cfg = copy.deepcopy(dict(cfg.optimizer))
    if is_optimizers_dict(optimizer_cfg):
        raise ConfigError('a dict of optimizers: explain one at a time, e.g. --cfg-options '
                          'optimizer=<one of them>', key='optimizer')
    constructor = build_optimizer_constructor(dict(
        type=optimizer_cfg.pop('constructor', DEFAULT_CONSTRUCTOR), optimizer_cfg=optimizer_cfg,
        paramwise_cfg=optimizer_cfg.pop('paramwise_cfg', None)))
    optimizer = constructor(model)
    plan = getattr(constructor, 'last_plan', None)
    if plan is None:  # no paramwise_cfg (model.parameters()), or a constructor of its own
        rule = 'default' if isinstance(constructor, DefaultOptimizerConstructor) else \
            f'({type(constructor).__name__})'
        rows = [{'name': n, 'shape': tuple(p.shape), 'rule': rule, 'in_optimizer': True}
                for n, p in model.named_parameters()]
        return _with_groups(rows, model, optimizer), []
    names = [row['name'] for row in plan.rows]
    warnings = [unused_key_message(key, names) for key in plan.unused_custom_keys]
    return _with_groups(plan.rows, model, optimizer), warnings


def _with_groups(rows: List[Dict[str, Any]], model: nn.Module,
                 optimizer) -> List[Dict[str, Any]]:
    """Each row with the index and the values of the param group that holds its parameter."""
    params = dict(model.named_parameters(remove_duplicate=False))
    group_of = {id(p): i for i, g in enumerate(optimizer.param_groups) for p in g['params']}
    out = []
    for row in rows:
        param = params.get(row['name'])
        index = group_of.get(id(param)) if row['in_optimizer'] and param is not None else None
        group = optimizer.param_groups[index] if index is not None else {}
        betas = group.get('betas')
        out.append({'group': index, 'name': row['name'], 'shape': list(row['shape']),
                    'lr': group.get('lr'), 'weight_decay': group.get('weight_decay'),
                    'momentum': group.get('momentum', betas[0] if betas else None),
                    'rule': row['rule']})
    return out


def format_table(rows: List[Dict[str, Any]]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return '-'
        if isinstance(value, float):
            return f'{value:.4g}'
        if isinstance(value, list):
            return 'x'.join(map(str, value)) or 'scalar'
        return str(value)

    table = [list(COLUMNS)] + [[cell(r[c]) for c in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    return '\n'.join('  '.join(v.ljust(w) for v, w in zip(line, widths)).rstrip()
                     for line in table)


def summary(rows: List[Dict[str, Any]]) -> str:
    groups = {r['group'] for r in rows if r['group'] is not None}
    settings = {(r['lr'], r['weight_decay'], r['momentum']) for r in rows if r['group'] is not None}
    return (f'{len(rows)} parameters in {len(groups)} param group(s), {len(settings)} distinct '
            '(lr, weight_decay, momentum) settings')


def main(argv=None) -> int:
    args = parse_args(argv)
    optim_log = logging.getLogger('mtrain.optim')
    level = optim_log.level
    optim_log.setLevel(logging.ERROR)  # this tool reports the same itself
    try:
        rows, warnings = explain(load_config(args.config, parse_cfg_options(args.cfg_options)))
    except ConfigError as e:
        print(f'error: {e.with_file(args.config)}', file=sys.stderr)
        return 2
    finally:
        optim_log.setLevel(level)
    if args.json:
        print(json.dumps({'rows': rows, 'warnings': warnings}, indent=1))
    else:
        print(format_table(rows))
        print(summary(rows))
        for warning in warnings:
            print(f'warning: {warning}')
    return 1 if any('no parameter name contains it' in w for w in warnings) else 0


if __name__ == '__main__':
    sys.exit(main())
