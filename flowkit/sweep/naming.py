"""Run directory names of sweep points: readable, stable, collision-free.

A point's name is its bindings with short keys and plain values, comma-separated:
``lr=0.002,schedule=cosine_vpred`` for ``Trainer.lr = 0.002`` and
``Trainer.schedule = @schedule.cosine_vpred()``. Values are written plainly (a
reference's component name without ``@kind.`` and ``()``, a string without its quotes)
and then sanitised to ``[A-Za-z0-9._+-]`` (anything else becomes ``_``), so the name is a
safe directory and shell word on every file system.

Stable: a name depends only on the point's bindings and the sweep's keys, never on the
order of launch or the machine. Collision-free: when two points of a sweep would get the
same name (values that differ only in characters the sanitising removed, or in letter
case, which a case-insensitive file system folds), or when a name is longer than
`MAX_NAME`, a short hash of the exact bindings is appended (``~1a2b3c4d``), and the
readable part is cut to fit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from flowkit.report.compare import readable_value, short_keys
from flowkit.sweep.grid import Point

__all__ = ["MAX_NAME", "point_hash", "point_names", "readable_value"]

#: Longest directory name written (well under the 255 bytes of common file systems, and
#: short enough to read in a listing).
MAX_NAME = 96
_HASH = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def point_hash(point: Point) -> str:
    """8 hex digits of SHA-256 over the point's exact bindings (whitespace removed)."""
    canon = "\n".join(k + "=" + re.sub(r"\s+", "", v) for k, v in point.bindings)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:_HASH]


def _readable(point: Point, shorts: dict[str, str]) -> str:
    return ",".join(f"{_UNSAFE.sub('_', shorts[k])}={readable_value(v)}" for k, v in point.bindings)


def point_names(points: Sequence[Point], keys: Sequence[str] | None = None) -> list[str]:
    """The directory name of each point (see the module docstring), in order.

    Args:
        points: the sweep's points.
        keys: every key the sweep binds (default: those of ``points``); short names are
            chosen among them, so adding points of the same keys never renames a point.
    """
    keys = list(dict.fromkeys(keys if keys is not None else (k for p in points for k, _ in p.bindings)))
    shorts = short_keys(keys)
    readable = [_readable(p, shorts) if p.bindings else "default" for p in points]
    folded = [r.lower() for r in readable]
    names = []
    for point, name, fold in zip(points, readable, folded, strict=True):
        clash = folded.count(fold) > 1
        if clash or len(name) > MAX_NAME:
            name = f"{name[: MAX_NAME - _HASH - 1].rstrip(',=_')}~{point_hash(point)}"
        names.append(name)
    return names
