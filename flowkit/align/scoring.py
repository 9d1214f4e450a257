"""Alignment quality as a number: boundary error against reference timings, in frames.

Reference units (a forced alignment: MFA TextGrids, or a teacher's own timings) and
estimated units are matched by characters: a reference unit's start is compared with the
estimated unit that starts at the same character, its end with the one that ends at the
same character (a reference unit may span several estimated words, e.g. a teacher's
"in the"). Per phoneme, a reference ``phones`` tier is compared with the aligner's token
boundaries inside each word whose phones and tokens are the same sequence.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

__all__ = ["BoundaryError", "phone_boundary_errors", "store_timings", "textgrid_phones", "textgrid_timings",
           "word_boundary_errors"]

Units = Sequence[tuple[int, int, int, int]]


@attrs.frozen
class BoundaryError:
    """|estimated - reference| boundary frames: ``count`` boundaries over ``segments`` segments."""

    count: int
    segments: int
    mean: float
    p90: float
    median: float

    @classmethod
    def of(cls, errors: Sequence[int], segments: int) -> BoundaryError:
        if not errors:
            return cls(0, segments, float("nan"), float("nan"), float("nan"))
        e = np.asarray(errors, dtype=np.float64)
        return cls(len(e), segments, float(e.mean()), float(np.percentile(e, 90)), float(np.median(e)))

    def to_dict(self) -> dict[str, float | int]:
        return attrs.asdict(self)


def word_boundary_errors(reference: Mapping[str, Units], estimate: Mapping[str, Units]) -> BoundaryError:
    """Start and end errors of every reference unit that the estimate has boundaries for.

    Args:
        reference, estimate: segment id -> units ``(char_start, char_end, frame_start, frame_end)``.
    """
    errors: list[int] = []
    segments = 0
    for sid, ref in reference.items():
        est = estimate.get(sid)
        if not ref or not est:
            continue
        segments += 1
        starts = {cs: fs for cs, _, fs, _ in est}
        ends = {ce: fe for _, ce, _, fe in est}
        for cs, ce, fs, fe in ref:
            if cs in starts:
                errors.append(abs(starts[cs] - fs))
            if ce in ends:
                errors.append(abs(ends[ce] - fe))
    return BoundaryError.of(errors, segments)


def phone_boundary_errors(reference: Mapping[str, Sequence[tuple[int, int, str]]],
                          estimate: Mapping[str, Sequence[tuple[int, int, str]]]) -> tuple[BoundaryError, float]:
    """Phone start errors where a segment's two phone strings agree.

    Args:
        reference, estimate: segment id -> phones ``(frame_start, frame_end, symbol)`` in
            order (pauses left out). Stress and length marks are dropped (a reference that
            times them separately, as Piper does, folds them into their neighbours); the
            remaining symbols are compared as one string of code points, and each estimated
            symbol's start is compared with the reference start of its first code point.

    Returns:
        The error over the phones of segments whose strings are equal, and the share of
        reference phones those segments hold (the coverage).
    """
    errors: list[int] = []
    segments = covered = total = 0
    for sid, ref in reference.items():
        ref_points = [(fs, ch) for fs, _, sym in ref for ch in _bare(sym)]
        total += len(ref_points)
        est = [(fs, _bare(sym)) for fs, _, sym in estimate.get(sid, ())]
        est = [(fs, sym) for fs, sym in est if sym]
        if not ref_points or not est or "".join(ch for _, ch in ref_points) != "".join(sym for _, sym in est):
            continue
        segments += 1
        covered += len(ref_points)
        at = 0
        for fs, sym in est:
            errors.append(abs(fs - ref_points[at][0]))
            at += len(sym)
    return BoundaryError.of(errors, segments), (covered / total if total else 0.0)


_MARKS = frozenset("ˈˌː ")


def _bare(symbol: str) -> str:
    return "".join(ch for ch in symbol if ch not in _MARKS)


def store_timings(store: str | os.PathLike[str]) -> dict[str, dict[str, Units]]:
    """Every timings version of ``store`` (``prepare`` and each written one): segment id -> units.

    ``prepare``'s forced-aligned segments are listed as ``prepare``, its estimated ones
    (``aligner.energy``'s) as ``prepare (estimated)``.
    """
    import zarr

    from flowkit.data.store import StoreReader
    from flowkit.data.store.timings import PREPARE, Timings, read_active, versions

    reader = StoreReader.open(store)
    try:
        ids = list(reader.strings["segment_id"])
        path, attrs_, n = reader.path, dict(reader.attrs), reader.n_segments
    finally:
        reader.close()
    group = zarr.open_group(str(path), mode="r", zarr_format=3)
    offsets = np.asarray(group["unit_offsets"][: n + 1])
    root = Timings(np.asarray(group["units"][: int(offsets[-1])]), offsets,
                   np.asarray(group["has_units"][:n]).astype(bool),
                   np.asarray(group["units_estimated"][:n]).astype(bool),
                   np.zeros(n, dtype=np.int16))
    out: dict[str, dict[str, Units]] = {}
    forced = {sid: u for sid, u, est in _units_of(root, ids) if not est}
    guessed = {sid: u for sid, u, est in _units_of(root, ids) if est}
    if forced:
        out[PREPARE] = forced
    if guessed:
        out[f"{PREPARE} (estimated)"] = guessed
    for name in versions(attrs_):
        found = read_active(path, {**attrs_, "timings": {**attrs_["timings"], "active": name}}, n)
        if found is not None:
            out[name] = {sid: u for sid, u, _ in _units_of(found[0], ids)}
    return out


def _units_of(t: Any, ids: Sequence[str]) -> list[tuple[str, Units, bool]]:
    return [(ids[i], tuple(map(tuple, t.units[t.unit_offsets[i]:t.unit_offsets[i + 1]].tolist())),
             bool(t.units_estimated[i])) for i in range(len(ids)) if t.has_units[i]]


def textgrid_timings(store: str | os.PathLike[str], folder: str | os.PathLike[str],
                     tier: str = "words") -> dict[str, Units]:
    """Reference units of ``store``'s segments from ``folder/<segment_id>.TextGrid`` (missing or
    mismatched grids are left out)."""
    from flowkit.data.store import StoreReader
    from flowkit.data.textgrid import TextGridError, read_word_intervals, units_from_intervals

    reader = StoreReader.open(store)
    try:
        out: dict[str, Units] = {}
        for i, sid in enumerate(reader.strings["segment_id"]):
            grid = Path(folder) / f"{sid}.TextGrid"
            if not grid.is_file():
                continue
            try:
                out[sid] = units_from_intervals(read_word_intervals(grid, tier), reader.strings["text"][i],
                                                reader.frame_rate, int(reader.lengths[i]))
            except TextGridError:
                continue
        return out
    finally:
        reader.close()


def textgrid_phones(store: str | os.PathLike[str], folder: str | os.PathLike[str],
                    tier: str = "phones") -> dict[str, list[tuple[int, int, str]]]:
    """Reference phones ``(frame_start, frame_end, symbol)`` of ``store``'s segments from their TextGrids."""
    from flowkit.data.store import StoreReader
    from flowkit.data.textgrid import TextGridError, read_word_intervals

    reader = StoreReader.open(store)
    try:
        rate = reader.frame_rate
        ids = list(reader.strings["segment_id"])
    finally:
        reader.close()
    out: dict[str, list[tuple[int, int, str]]] = {}
    for sid in ids:
        grid = Path(folder) / f"{sid}.TextGrid"
        if not grid.is_file():
            continue
        try:
            out[sid] = [(round(a * rate), round(b * rate), label) for a, b, label in read_word_intervals(grid, tier)
                        if label.strip()]
        except TextGridError:
            continue
    return out
