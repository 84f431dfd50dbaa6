"""Whether a loader's ``collate_fn`` can batch a dataset's items: the first key it cannot.

torch's ``default_collate`` stacks tensors and numbers and recurses into
dicts and lists. Per-sample metadata (mmdet's ``img_metas``: file names,
shapes, ``None`` fields) fails there with two chained torch tracebacks that
name no key (``found <class 'NoneType'>``), or, worse, is merged into one
dict of lists that a model iterating over "the metas" walks as key
strings. This finds the key and says how to batch it.
"""

from typing import Any, Callable, Optional

from torch.utils.data.dataloader import default_collate

from ..utils import ConfigError
from ..utils.data_container import CollateWithContainers, contains_data_container

_FIX = ("wrap it in mmcv's DataContainer(value, cpu_only=True), which mtrain batches as a list "
        'of per-sample values, or give the dataset a collate_fn method (or set '
        'data.train_dataloader.collate_fn) that batches it')


def collate_problem(items: list, collate_fn: Optional[Callable], where: str) -> None:
    """Raise :class:`ConfigError` naming the first key of ``items`` that ``collate_fn`` mishandles."""
    collate = collate_fn or default_collate
    try:
        batch = collate(items)
    except (TypeError, RuntimeError, ValueError) as e:
        key = _failing_key(items, collate)
        what = f"the key '{key}'" if key else 'its items'
        raise ConfigError(f'{where}: the loader cannot batch {what} ({_first_line(e)}); '
                          f'{_FIX}', key='data.train') from e
    torch_default = collate is default_collate or (
        isinstance(collate, CollateWithContainers) and not contains_data_container(items[0]))
    if torch_default and isinstance(items[0], dict) and isinstance(batch, dict):
        for key, value in items[0].items():
            merged = batch.get(key)
            # Texts and tuples (file names, shapes) became lists: per-sample metas, not
            # values meant to be stacked (a dict of tensors collates as intended).
            if 'meta' in str(key) and isinstance(value, dict) and isinstance(merged, dict) \
                    and any(isinstance(v, list) for v in merged.values()):
                raise ConfigError(
                    f"{where}: each item's '{key}' is a dict, and torch's default collate "
                    f"merges them into ONE dict of lists (iterating over batch['{key}'] gives "
                    f'its key strings, not one dict per sample); {_FIX}', key='data.train')


def _failing_key(items: list, collate: Callable) -> Any:
    """The first top-level key whose values alone cannot be collated (None: not a dict)."""
    if not all(isinstance(item, dict) for item in items):
        return None
    for key in items[0]:
        try:
            collate([{key: item.get(key)} for item in items])
        except (TypeError, RuntimeError, ValueError):
            return key
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f'{type(error).__name__}: {text[0] if text else ""}'
