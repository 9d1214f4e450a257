"""Evaluation figures with their uncertainty: a bootstrap over utterances and noise seeds.

Shape legend: u utterances, s noise seeds.

An eval's WER moves with the test sentences drawn and with the noise each utterance was
generated from; one eval from one seed gives one number and no spread. `bootstrap` takes a
table ``[u s]`` of per-utterance values (one column per seed) and resamples both axes with
replacement, utterances and seeds independently (a two-way, "crossed" bootstrap; Efron &
Tibshirani 1993, "An Introduction to the Bootstrap", ch. 8 on structured data), recomputing
the figure each time; the 95 % interval is the 2.5th and 97.5th percentiles of those figures
(the percentile interval). A corpus-level rate (WER: edits over reference words) is a ratio
of sums, resampled as such: ``numerator`` edits and ``denominator`` words per cell.

`differs` compares two intervals of the same figure: two evals differ when their intervals
do not overlap (a conservative rule: two 95 % intervals that just touch correspond to a
difference significant at well under 5 %).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError

__all__ = ["Interval", "bootstrap", "differs", "table"]

#: resamples per interval: the 2.5th percentile of 2000 draws moves by ~1 % of the interval's
#: width between random streams, finer than the figures are printed
RESAMPLES = 2000


@attrs.frozen
class Interval:
    """A figure's point estimate on the whole table and its bootstrap interval."""

    mean: float
    low: float
    high: float
    confidence: float
    utterances: int
    seeds: int

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def text(self, digits: int = 3) -> str:
        """``"0.274 [0.251, 0.299]"``."""
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def bootstrap(numerator: Any, denominator: Any | None = None, *, confidence: float = 0.95,
              resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """The mean of ``numerator [u s]`` (with ``denominator [u s]``: sum / sum, a ratio of
    totals) and its percentile interval from resampling utterances and seeds.

    NaN cells (an utterance not scored under one seed) are left out of both sums. The
    random stream is fixed by ``seed``: the same table gives the same interval.

    Raises:
        ConfigError: the table is empty or not 2-D, the two tables differ in shape,
            ``confidence`` is outside (0, 1), or ``resamples`` < 1.
    """
    num = np.asarray(numerator, dtype=np.float64)
    if num.ndim != 2 or num.size == 0:
        raise ConfigError(f"bootstrap: a table of shape {num.shape}; give [utterances seeds] with at least one cell")
    den = np.ones_like(num) if denominator is None else np.asarray(denominator, dtype=np.float64)
    if den.shape != num.shape:
        raise ConfigError(f"bootstrap: numerator {num.shape} and denominator {den.shape} differ in shape")
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"bootstrap: confidence {confidence}; give a share in (0, 1), e.g. 0.95")
    if resamples < 1:
        raise ConfigError(f"bootstrap: resamples {resamples}; give 1 or more")
    valid = np.isfinite(num) & np.isfinite(den)
    num, den = np.where(valid, num, 0.0), np.where(valid, den, 0.0)
    u, s = num.shape
    point = float(num.sum() / den.sum()) if den.sum() > 0 else float("nan")
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, u, size=(resamples, u))
    cols = rng.integers(0, s, size=(resamples, s))
    # counts of each utterance and each seed in a resample: the resampled sum of a table is
    # row_counts @ table @ col_counts, with no [resamples u s] array
    row_counts = np.zeros((resamples, u))
    col_counts = np.zeros((resamples, s))
    np.add.at(row_counts, (np.arange(resamples)[:, None], rows), 1.0)
    np.add.at(col_counts, (np.arange(resamples)[:, None], cols), 1.0)
    top = np.einsum("ru,us,rs->r", row_counts, num, col_counts)
    bottom = np.einsum("ru,us,rs->r", row_counts, den, col_counts)
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = top / bottom
    stats = stats[np.isfinite(stats)]
    alpha = (1.0 - confidence) / 2.0
    low, high = (np.quantile(stats, [alpha, 1.0 - alpha]) if stats.size else (np.nan, np.nan))
    return Interval(point, float(low), float(high), confidence, u, s)


def differs(a: Interval, b: Interval) -> bool:
    """Whether two evals' intervals of one figure do not overlap (module docstring)."""
    return bool(a.high < b.low or b.high < a.low)


def table(records_by_seed: Sequence[Sequence[dict[str, Any]]], key: str,
          weight: str | None = None) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """``(numerator [u s], denominator [u s] or None, utterance ids)`` of ``key`` from each
    seed's ``results.jsonl`` records; utterances are those every seed holds, in the first
    seed's order. With ``weight`` (e.g. ``"words"`` for ``"wer"``) the numerator is
    ``key x weight`` (edits) and the denominator ``weight``: the corpus-level rate."""
    by_seed = [{r["utt"]: r for r in records} for records in records_by_seed]
    utts = [r["utt"] for r in records_by_seed[0] if all(r["utt"] in s for s in by_seed)] if by_seed else []

    def cell(r: dict[str, Any], k: str) -> float:
        v = r.get(k)
        return float(v) if isinstance(v, (int, float)) else float("nan")

    if weight is None:
        return np.array([[cell(s[u], key) for s in by_seed] for u in utts]).reshape(len(utts), len(by_seed)), None, utts
    w = np.array([[cell(s[u], weight) for s in by_seed] for u in utts]).reshape(len(utts), len(by_seed))
    v = np.array([[cell(s[u], key) for s in by_seed] for u in utts]).reshape(len(utts), len(by_seed))
    return v * w, w, utts
