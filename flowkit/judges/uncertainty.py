"""Evaluation figures with their uncertainty: a bootstrap over utterances and noise seeds, of
one eval's figure and of the difference between two evals.

Shape legend: u utterances, s noise seeds.

An eval's WER moves with the test sentences drawn and with the noise each utterance was
generated from; one eval from one seed gives one number and no spread. `bootstrap` takes a
table ``[u s]`` of per-utterance values (one column per seed) and resamples both axes with
replacement, utterances and seeds independently (a two-way, "crossed" bootstrap; Efron &
Tibshirani 1993, "An Introduction to the Bootstrap", ch. 8 on structured data), recomputing
the figure each time; the 95 % interval is the 2.5th and 97.5th percentiles of those figures
(the percentile interval). A corpus-level rate (WER: edits over reference words) is a ratio
of sums, resampled as such: ``numerator`` edits and ``denominator`` words per cell.

Two evals of the same utterances (one test list) are compared by `paired_difference`, the
paired bootstrap of Koehn 2004 ("Statistical Significance Tests for Machine Translation
Evaluation"): each draw resamples the utterances once and applies the same rows to both
evals' tables (the seeds too when both used one seed list; else each eval's seeds are drawn
on their own) and records figure B - figure A; the difference is larger than the noise when
its 95 % interval excludes 0. What makes one sentence hard makes it hard for both evals and
cancels in the difference, so this test finds differences that the intervals of the two
figures hide. `differs` is the rule for evals of different utterances, or of ``seeds.json``
files without their tables: two evals differ when their intervals do not overlap (a
conservative rule: two 95 % intervals that just touch correspond to a difference significant
at well under 5 %). `compare` applies the paired test to two ``seeds.json`` contents
(`flowkit.evaluation.seeds`) where both hold their tables, the overlap rule otherwise, and
says which rule it used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError

__all__ = ["Interval", "SeedTable", "bootstrap", "compare", "differs", "paired_difference", "table"]

#: resamples per interval: the 2.5th percentile of 2000 draws moves by ~1 % of the interval's
#: width between random streams, finer than the figures are printed
RESAMPLES = 2000
#: the protocol entries of a seeds.json that two evals must share to measure the same thing
PROTOCOL_KEYS = ("testset_sha256", "nfe", "cfg", "judges")


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

    @classmethod
    def from_json(cls, data: Any) -> Interval | None:
        """The interval `to_dict` wrote, or None when ``data`` is not one (a damaged file):
        ``mean``, ``low``, ``high`` and ``confidence`` real numbers, ``utterances`` and
        ``seeds`` integers (a bool is neither), and no other key."""
        if not isinstance(data, dict) or set(data) != {f.name for f in attrs.fields(cls)}:
            return None
        reals, counts = ("mean", "low", "high", "confidence"), ("utterances", "seeds")
        if not all(_real(data[k]) for k in reals + counts) or not all(isinstance(data[k], int) for k in counts):
            return None
        return cls(**{k: float(data[k]) for k in reals}, **{k: data[k] for k in counts})

    def text(self, digits: int = 3) -> str:
        """``"0.274 [0.251, 0.299]"``."""
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


@attrs.frozen(eq=False)
class SeedTable:
    """One figure's cells of a ``--seeds`` eval: ``numerator [u s]`` and ``denominator [u s]``
    (None: the figure is a mean), row i the utterance ``utts[i]``, column k the noise seed
    ``seeds[k]``; a cell not scored is NaN. In JSON (`to_json`, `from_json`) NaN is null."""

    utts: tuple[str, ...]
    seeds: tuple[int, ...]
    numerator: np.ndarray
    denominator: np.ndarray | None

    def to_json(self) -> dict[str, Any]:
        def cells(x: np.ndarray) -> list[list[float | None]]:
            return [[v if math.isfinite(v) else None for v in row] for row in x.tolist()]

        return {"utts": list(self.utts), "seeds": list(self.seeds), "numerator": cells(self.numerator),
                "denominator": None if self.denominator is None else cells(self.denominator)}

    @classmethod
    def from_json(cls, data: Any) -> SeedTable | None:
        """The table `to_json` wrote, or None when ``data`` is not one (a damaged file)."""
        try:
            utts, seeds = tuple(str(u) for u in data["utts"]), tuple(int(s) for s in data["seeds"])

            def cells(x: Any) -> np.ndarray:
                if len(x) != len(utts) or any(len(row) != len(seeds) for row in x):
                    raise ValueError("not [utts seeds]")
                out = [[np.nan if v is None else float(v) for v in row] for row in x]
                return np.array(out, dtype=np.float64).reshape(len(utts), len(seeds))

            den = data["denominator"]
            return cls(utts, seeds, cells(data["numerator"]), None if den is None else cells(den))
        except (KeyError, TypeError, ValueError):
            return None


def _real(x: Any) -> bool:
    """Whether ``x`` is an int or a float (a bool is not)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _cells(numerator: Any, denominator: Any | None, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(numerator, denominator, scored)`` as ``[u s]``: ``scored`` marks the cells finite in
    both tables; the others are zero in both float64 tables."""
    num = np.asarray(numerator, dtype=np.float64)
    if num.ndim != 2 or num.size == 0:
        raise ConfigError(f"{where}: a table of shape {num.shape}; give [utterances seeds] with at least one cell")
    den = np.ones_like(num) if denominator is None else np.asarray(denominator, dtype=np.float64)
    if den.shape != num.shape:
        raise ConfigError(f"{where}: numerator {num.shape} and denominator {den.shape} differ in shape")
    valid = np.isfinite(num) & np.isfinite(den)
    return np.where(valid, num, 0.0), np.where(valid, den, 0.0), valid


def _check(where: str, confidence: float, resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"{where}: confidence {confidence}; give a share in (0, 1), e.g. 0.95")
    if resamples < 1:
        raise ConfigError(f"{where}: resamples {resamples}; give 1 or more")


def _counts(draws: np.ndarray, n: int) -> np.ndarray:
    """``[r n]``: how often each of n indices is drawn in each row of ``draws [r k]``."""
    counts = np.zeros((draws.shape[0], n))
    np.add.at(counts, (np.arange(draws.shape[0])[:, None], draws), 1.0)
    return counts


def _ratio(num: np.ndarray, den: np.ndarray) -> float:
    return float(num.sum() / den.sum()) if den.sum() > 0 else float("nan")


def _resampled(row_counts: np.ndarray, num: np.ndarray, den: np.ndarray, col_counts: np.ndarray) -> np.ndarray:
    """The figure of each resample ``[r]`` (NaN where its denominator is 0): the resampled sum
    of a table is ``row_counts @ table @ col_counts``, with no ``[r u s]`` array."""
    top = np.einsum("ru,us,rs->r", row_counts, num, col_counts)
    bottom = np.einsum("ru,us,rs->r", row_counts, den, col_counts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return top / bottom


def _percentiles(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    stats = stats[np.isfinite(stats)]
    if not stats.size:
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


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
    num, den, _ = _cells(numerator, denominator, "bootstrap")
    _check("bootstrap", confidence, resamples)
    u, s = num.shape
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, u, size=(resamples, u))
    cols = rng.integers(0, s, size=(resamples, s))
    stats = _resampled(_counts(rows, u), num, den, _counts(cols, s))
    low, high = _percentiles(stats, confidence)
    return Interval(_ratio(num, den), low, high, confidence, u, s)


def paired_difference(a_num: Any, a_den: Any | None, b_num: Any, b_den: Any | None, *, same_seeds: bool,
                      confidence: float = 0.95, resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """Figure B - figure A of two evals of the same utterances, with the percentile interval
    of the paired bootstrap (Koehn 2004, "Statistical Significance Tests for Machine
    Translation Evaluation"; module docstring).

    ``a_num``, ``a_den`` ``[u s_a]`` and ``b_num``, ``b_den`` ``[u s_b]``: each eval's
    numerators and denominators as `bootstrap` takes them (a denominator None: ones, the
    figure is a mean); row i of both is the same utterance. Each of ``resamples`` draws picks
    the rows once for both tables; with ``same_seeds`` (column k is the same noise seed in
    both, so s_a = s_b) the columns once for both, else each table's columns on their own.
    Only cells both evals scored are compared: with ``same_seeds`` a cell NaN in either table
    is left out of both (of each side's numerator and denominator sums); else an utterance
    (row) with no scored cell in one table is left out of both. A cell scored in one eval
    only would move that eval's figure alone, a difference the evals do not make.
    ``mean`` is B - A on the cells compared (0 for equal tables, NaN when a side's
    denominator sums to 0, e.g. no cell compared); ``utterances`` is u; ``seeds`` s_a with
    ``same_seeds``, else the fewer of s_a and s_b. The difference is larger than the noise
    when ``low > 0`` or ``high < 0``. The random stream is fixed by ``seed``; with
    ``same_seeds`` eval A's resamples are `bootstrap`'s of the same ``seed``.

    Raises:
        ConfigError: a table is empty or not 2-D, a numerator and its denominator differ in
            shape, the two evals differ in their number of utterances (rows), or with
            ``same_seeds`` in their number of seeds (columns); ``confidence`` is outside
            (0, 1), or ``resamples`` < 1.
    """
    an, ad, a_ok = _cells(a_num, a_den, "paired_difference: eval A")
    bn, bd, b_ok = _cells(b_num, b_den, "paired_difference: eval B")
    (u, sa), (ub, sb) = an.shape, bn.shape
    if u != ub:
        raise ConfigError(f"paired_difference: eval A has {u} utterances and eval B {ub}; the paired test needs "
                          "the same utterances in the same order in both (keep the rows both hold)")
    if same_seeds and sa != sb:
        raise ConfigError(f"paired_difference: same_seeds with {sa} seeds in eval A and {sb} in eval B; "
                          "give same_seeds=False for evals of different seed lists")
    _check("paired_difference", confidence, resamples)
    keep = a_ok & b_ok if same_seeds else (a_ok.any(axis=1) & b_ok.any(axis=1))[:, None]
    an, ad, bn, bd = (np.where(keep, x, 0.0) for x in (an, ad, bn, bd))
    rng = np.random.default_rng(seed)
    rows = _counts(rng.integers(0, u, size=(resamples, u)), u)
    cols_a = _counts(rng.integers(0, sa, size=(resamples, sa)), sa)
    cols_b = cols_a if same_seeds else _counts(rng.integers(0, sb, size=(resamples, sb)), sb)
    stats = _resampled(rows, bn, bd, cols_b) - _resampled(rows, an, ad, cols_a)
    low, high = _percentiles(stats, confidence)
    return Interval(_ratio(bn, bd) - _ratio(an, ad), low, high, confidence, u, sa if same_seeds else min(sa, sb))


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


def _paired(ta: SeedTable | None, tb: SeedTable | None, *, confidence: float, resamples: int,
            seed: int) -> tuple[Interval, int] | None:
    """`paired_difference` over the utterances both tables hold (in A's order) and how many
    those are; None without both tables, without a shared utterance, or for tables of
    different kinds (a rate and a mean) or without seed columns."""
    if ta is None or tb is None or (ta.denominator is None) != (tb.denominator is None):
        return None
    where_b = {utt: i for i, utt in enumerate(tb.utts)}
    keep_a = [i for i, utt in enumerate(ta.utts) if utt in where_b]
    if not keep_a:
        return None
    keep_b = [where_b[ta.utts[i]] for i in keep_a]

    def rows(x: np.ndarray | None, keep: list[int]) -> np.ndarray | None:
        return None if x is None else x[keep]

    try:
        interval = paired_difference(rows(ta.numerator, keep_a), rows(ta.denominator, keep_a),
                                     rows(tb.numerator, keep_b), rows(tb.denominator, keep_b),
                                     same_seeds=ta.seeds == tb.seeds, confidence=confidence, resamples=resamples,
                                     seed=seed)
    except ConfigError:  # a table without seed columns: a damaged file
        return None
    return interval, len(keep_a)


def compare(a: Any, b: Any, *, confidence: float = 0.95, resamples: int = RESAMPLES,
            seed: int = 0) -> list[dict[str, Any]]:
    """Per figure of the generated audio in both ``seeds.json`` contents ``a`` and ``b``
    (`flowkit.evaluation.seeds`), in ``a``'s order, a dict of:

    - ``figure``: its name; ``a``, ``b``: the two evals' `Interval`; ``difference``:
      ``b.mean - a.mean``;
    - ``rule`` ``"paired"`` where both files hold the figure's table (``"tables"``), share
      utterances and the paired interval is finite: ``paired`` is the `paired_difference`
      B - A over the utterances both hold (matched by id, in ``a``'s order; ``shared`` says
      how many), seeds drawn jointly where both seed lists are equal; ``differs``: ``paired``
      excludes 0;
    - ``rule`` ``"overlap"`` otherwise (a file without tables, none shared, a damaged table,
      no cell scored in both) where both intervals' bounds are finite: ``paired`` and
      ``shared`` None; ``differs``: the two intervals do not overlap (`differs`);
    - ``rule`` ``"none"`` where neither test is computable: ``paired`` and ``shared`` None,
      ``differs`` False;
    - ``same_protocol``: test list SHA-256, NFE, CFG and judges are equal (otherwise the
      figures measure different things).

    A figure entry that is not an interval (`Interval.from_json`) is left out; a block
    (``"protocol"``, ``"figures"``, ``"tables"`` or its ``"generated"``) that is not a dict
    counts as absent, and ``a`` or ``b`` not a dict gives []. The intervals come from the
    files; only ``paired`` is drawn here, with ``confidence``, ``resamples`` and ``seed``.
    """
    if not isinstance(a, dict) or not isinstance(b, dict):
        return []

    def block(data: dict[str, Any], *keys: str) -> dict[str, Any]:
        for key in keys:
            data = data.get(key) if isinstance(data, dict) else None
        return data if isinstance(data, dict) else {}

    pa, pb = block(a, "protocol"), block(b, "protocol")
    same = all(pa.get(k) == pb.get(k) for k in PROTOCOL_KEYS)
    tables_a, tables_b = block(a, "tables", "generated"), block(b, "tables", "generated")
    rows = []
    for name, fa in block(a, "figures", "generated").items():
        ia, ib = Interval.from_json(fa), Interval.from_json(block(b, "figures", "generated").get(name))
        if ia is None or ib is None:
            continue
        pair = _paired(SeedTable.from_json(tables_a.get(name)), SeedTable.from_json(tables_b.get(name)),
                       confidence=confidence, resamples=resamples, seed=seed)
        row = {"figure": name, "a": ia, "b": ib, "difference": ib.mean - ia.mean, "same_protocol": same,
               "paired": None, "shared": None}
        if pair is not None and all(math.isfinite(x) for x in (pair[0].mean, pair[0].low, pair[0].high)):
            row.update(rule="paired", paired=pair[0], shared=pair[1], differs=bool(pair[0].low > 0 or pair[0].high < 0))
        elif all(math.isfinite(x) for x in (ia.low, ia.high, ib.low, ib.high)):
            row.update(rule="overlap", differs=differs(ia, ib))
        else:
            row.update(rule="none", differs=False)
        rows.append(row)
    return rows
