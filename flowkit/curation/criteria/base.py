"""What every criterion shares: the `Decision` it returns and the per-speaker robust rule.

The rule (`robust_bounds`): within a group of clips (one speaker reading one language), a
clip is an outlier when its value lies more than ``k`` robust standard deviations from the
group's median, the standard deviation estimated as 1.4826 x the median absolute deviation
(MAD; Rousseeuw & Croux 1993, "Alternatives to the median absolute deviation": the MAD
breaks down only past 50 % contamination, where a mean and standard deviation are moved by
the very clips they should find). ``min_scale`` keeps a group of near-identical values
from flagging a hair's difference; a ``floor``/``cap`` bounds the rule where an absolute
value is known to be fine or bad whatever the group does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

__all__ = ["MAD_TO_SIGMA", "Decision", "Threshold", "by_group", "robust_bounds"]

#: 1 / Phi^-1(3/4): the MAD of a normal distribution times this is its standard deviation
MAD_TO_SIGMA = 1.4826
#: groups with fewer measured clips than this take the statistics of the whole corpus:
#: a median and MAD of a handful of clips are too loose to cut on
MIN_GROUP = 12


@attrs.frozen
class Threshold:
    """The bounds a group's clips must stay within (None: no bound on that side)."""

    group: str
    median: float
    scale: float  # the robust standard deviation the bounds are counted in
    low: float | None
    high: float | None
    clips: int  # measured clips the statistics come from

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Decision:
    """One criterion's verdict on every clip, in the order of the clips given.

    Attributes:
        criterion: the registered name, e.g. ``"transcript_cer"``.
        label: what ``values`` are, for the report's axis (with units).
        values: the plotted value of each clip (nan: not measured, e.g. a language the
            recogniser does not know).
        reasons: per clip, why it is dropped (one line naming the value and the bound),
            or None.
        thresholds: the bounds per group (drawn on the report's distributions).
        notes: lines for the report (clips left unjudged and why).
    """

    criterion: str
    label: str
    values: list[float]
    reasons: list[str | None]
    thresholds: list[Threshold]
    notes: list[str] = attrs.Factory(list)


def robust_bounds(values: Sequence[float], *, k: float, side: str, min_scale: float,
                  floor: float | None = None,
                  cap: float | None = None) -> tuple[float, float, float | None, float | None]:
    """``(median, scale, low, high)`` of the finite ``values``.

    ``scale`` = max(`MAD_TO_SIGMA` x MAD, ``min_scale``); ``high`` = median + k x scale
    (``side`` "high" or "both"), raised to ``floor`` when below it (a value under ``floor``
    is never an outlier on the high side); ``low`` = median - k x scale ("low" or "both"),
    lowered to ``cap`` when above it. No finite value: nan median and no bounds.
    """
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=np.float64)
    if x.size == 0:
        return float("nan"), float("nan"), None, None
    median = float(np.median(x))
    scale = max(MAD_TO_SIGMA * float(np.median(np.abs(x - median))), float(min_scale))
    high = median + k * scale if side in ("high", "both") else None
    low = median - k * scale if side in ("low", "both") else None
    if high is not None and floor is not None:
        high = max(high, float(floor))
    if low is not None and cap is not None:
        low = min(low, float(cap))
    return median, scale, low, high


def by_group(groups: Sequence[str], values: Sequence[float],
             bounds: Callable[[Sequence[float]], tuple[float, float, float | None, float | None]],
             describe: Callable[[float, Threshold], str]) -> tuple[list[str | None], list[Threshold]]:
    """Apply ``bounds`` per group of clips; reasons per clip and the thresholds per group.

    A group with fewer than `MIN_GROUP` finite values takes the bounds of all values.
    ``describe(value, threshold)`` words the reason of a clip outside its bounds.
    """
    vals = np.asarray(values, dtype=np.float64)
    everyone = bounds(vals.tolist())
    thresholds: dict[str, Threshold] = {}
    for group in sorted(set(groups)):
        mine = [v for g, v in zip(groups, vals, strict=True) if g == group]
        finite = int(np.isfinite(np.asarray(mine, dtype=np.float64)).sum())
        median, scale, low, high = bounds(mine) if finite >= MIN_GROUP else everyone
        thresholds[group] = Threshold(group, median, scale, low, high, finite)
    reasons: list[str | None] = []
    for group, v in zip(groups, vals, strict=True):
        t = thresholds[group]
        outside = np.isfinite(v) and ((t.low is not None and v < t.low) or (t.high is not None and v > t.high))
        reasons.append(describe(float(v), t) if outside else None)
    return reasons, list(thresholds.values())
