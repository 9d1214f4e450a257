"""What a metrics record is, and how loggers read and write one.

A record is a flat mapping with ``"kind"`` (``"train"``, ``"eval"`` or ``"event"``) and
``"step"`` (optimizer updates completed), plus named values. Back-ends that plot scalars
(tensorboard, wandb) take every real number except ``step``, tagged ``<kind>/<name>``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["KINDS", "plain", "scalar_fields"]

KINDS = ("train", "eval", "event")


def _unwrap(value: Any) -> Any:
    """A numpy/torch scalar (0-d array or tensor) as its Python number; anything else as is."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        return value.item()
    return value


def plain(value: Any) -> Any:
    """``value`` as plain JSON data: numpy/torch scalars via ``.item()``, non-finite floats
    as None (strict JSON has no NaN), tuples as lists, mappings with string keys."""
    value = _unwrap(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def scalar_fields(record: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    """``(tag, value)`` of each real-number field of ``record`` (not bools, not ``step``),
    tagged ``<kind>/<name>``."""
    kind = record.get("kind", "train")
    for key, value in record.items():
        if key in ("step", "kind"):
            continue
        value = _unwrap(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        yield f"{kind}/{key}", float(value)
