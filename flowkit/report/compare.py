"""Comparing runs: which config bindings differ between them.

Each run is compared with the first through `flowkit.config.config_diff` on their
``config.gin`` texts; a binding that differs anywhere gets one row with every run's value
(``-`` where a run does not bind it).
"""

from __future__ import annotations

from collections.abc import Sequence

from flowkit.config import config_diff

__all__ = ["config_differences"]


def config_differences(texts: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``[(binding, [value in run 0, value in run 1, ...])]`` for bindings that differ, by name.

    Args:
        texts: the runs' ``config.gin`` texts, in the order of the report's columns.
    """
    if len(texts) < 2:
        return []
    diffs = [config_diff(texts[0], other) for other in texts[1:]]
    changed = [{**d.allowed, **d.refused} for d in diffs]
    keys = sorted({k for c in changed for k in c})
    rows = []
    for key in keys:
        first = next((c[key][0] for c in changed if key in c), None)
        values = [first] + [c[key][1] if key in c else first for c in changed]
        rows.append((key, ["-" if v is None else v for v in values]))
    return rows
