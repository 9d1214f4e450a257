"""Comparing runs: which config bindings differ between them.

Each run is compared with the first through `flowkit.config.config_diff` on their
``config.gin`` texts; a binding that differs anywhere gets one row with every run's value
(``-`` where a run does not bind it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from flowkit.config import config_diff
from flowkit.report.rundir import RunDir

__all__ = ["OBJECTIVES", "config_differences", "objective_value", "short_keys"]


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


def short_keys(keys: Sequence[str]) -> dict[str, str]:
    """The shortest unambiguous name of each binding key: ``Trainer.lr`` -> ``lr``.

    A key is cut to its last ``.``/``/``-separated parts, as few as keep it distinct from
    every other key given (``Trainer.lr`` and ``Probe.lr`` stay whole). Used for sweep
    point names and for the columns and legends of a comparison.
    """
    parts = {k: [p for p in re.split(r"[./]", k) if p] for k in keys}
    out: dict[str, str] = {}
    for key, mine in parts.items():
        for n in range(1, len(mine) + 1):
            tail = mine[-n:]
            if all(other[-n:] != tail for k2, other in parts.items() if k2 != key):
                out[key] = ".".join(tail)
                break
        else:
            out[key] = key
    return out


#: What a sweep or a comparison can rank runs by (each: lower is better).
OBJECTIVES = {
    "val_loss_ema": ("eval", "val_loss_ema", "best EMA validation loss"),
    "probe_wer": ("probe", "probe_wer", "best probe WER"),
}


def objective_value(run: RunDir, objective: str) -> float | None:
    """The run's best (lowest) value of ``objective`` (a key of `OBJECTIVES`); None when it
    logged none (no validation data, no probe)."""
    kind, key, _ = OBJECTIVES[objective]
    _, values = run.series(kind, key)
    finite = [v for v in values if math.isfinite(v)]
    return min(finite) if finite else None
