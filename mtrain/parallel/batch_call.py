"""How a batch becomes the arguments of a model call (the model contract)."""

from typing import Any, Callable


def call_with_batch(fn: Callable, batch: Any) -> Any:
    """Call ``fn`` with a dict batch as keywords, a list/tuple as positional args,
    anything else as the single argument."""
    if isinstance(batch, dict):
        return fn(**batch)
    if isinstance(batch, (list, tuple)):
        return fn(*batch)
    return fn(batch)
