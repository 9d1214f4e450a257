"""Which segments of a latent store a training load rejects, and why.

Every check is an array operation over the store's columns (a million segments are
checked in about a second: docs/data-format.md); only the failing rows are worded.
"""

from __future__ import annotations

import numpy as np

from flowkit.data.columns import ids_in
from flowkit.data.store import StoreReader

__all__ = ["store_rejections", "unit_problems", "unit_rejections"]


def unit_problems(units: np.ndarray, text_len: int, n_frames: int) -> str | None:
    """Why unit timings ``[u 4]`` are inconsistent with a text and frame count, or None when fine."""
    if units.shape[0] == 0:
        return "no units"
    cs, ce, fs, fe = units.T.astype(np.int64)
    if (cs < 0).any() or (ce > text_len).any() or (cs >= ce).any():
        return f"char span outside the text (0..{text_len}) or empty"
    if (fs < 0).any() or (fe > n_frames).any() or (fs >= fe).any():
        return f"frame span outside 0..{n_frames} or empty"
    if (cs[1:] < ce[:-1]).any() or (fs[1:] < fe[:-1]).any():
        return "units overlap or are out of order"
    return None


def store_rejections(reader: StoreReader, min_frames: int, max_frames: int | None, languages: set[str] | None,
                     require_units: bool) -> dict[int, tuple[str, str]]:
    """Row -> (reason, detail) for every segment of the store that fails a check.

    The checks, in order (the first failing one is the reason): ``non_finite``,
    ``too_short``, ``too_long``, ``empty_text``, ``unknown_language``, ``bad_units``,
    ``missing_units``. Computed as boolean arrays; only failing rows are worded.
    """
    n = reader.n_segments
    lengths = reader.lengths
    max_abs = reader.numeric["max_abs"]
    lang_names, lang_codes = reader.categorical("language")
    bad_units = unit_rejections(reader)
    has_units = reader.numeric["has_units"].astype(bool)
    checks: list[tuple[str, np.ndarray]] = [
        ("non_finite", ~np.isfinite(max_abs)),
        ("too_short", lengths < min_frames),
        ("too_long", lengths > max_frames if max_frames is not None else np.zeros(n, dtype=bool)),
        ("empty_text", reader.strings["text"].blank()),
        ("unknown_language", ~ids_in(lang_codes, lang_names, languages) if languages is not None
         else np.zeros(n, dtype=bool)),
        ("bad_units", np.isin(np.arange(n), np.fromiter(bad_units, dtype=np.int64, count=len(bad_units)))),
        ("missing_units", ~has_units if require_units else np.zeros(n, dtype=bool)),
    ]
    out: dict[int, tuple[str, str]] = {}
    for reason, failed in checks:
        for row in np.nonzero(failed)[0].tolist():
            if row in out:
                continue
            if reason == "non_finite":
                detail = f"latents hold non-finite values (max |x| = {float(max_abs[row])})"
            elif reason == "too_short":
                detail = f"{int(lengths[row])} frames < min_frames {min_frames}"
            elif reason == "too_long":
                detail = f"{int(lengths[row])} frames > max_frames {max_frames}"
            elif reason == "empty_text":
                detail = "the text is empty"
            elif reason == "unknown_language":
                detail = f"language {reader.strings['language'][row]!r} not in {sorted(languages or ())}"
            elif reason == "bad_units":
                detail = bad_units[row]
            else:
                detail = "no unit timings (prepare with --textgrids or --align energy)"
            out[row] = (reason, detail)
    return out


def unit_rejections(reader: StoreReader) -> dict[int, str]:
    """Row -> problem for every segment whose stored unit timings are inconsistent.

    Vectorised over all units of the store; `unit_problems` words the reason for the
    few bad ones.
    """
    n = reader.n_segments
    counts = np.diff(reader.unit_offsets)
    has = reader.numeric["has_units"].astype(bool)
    seg = np.repeat(np.arange(n), counts)
    cs, ce, fs, fe = reader.units.astype(np.int64).T
    text_len = reader.strings["text"].char_lengths()
    bad_unit = (cs < 0) | (ce > text_len[seg]) | (cs >= ce) | (fs < 0) | (fe > reader.lengths[seg]) | (fs >= fe)
    bad = np.zeros(n, dtype=bool)
    bad[seg[bad_unit]] = True
    same = seg[1:] == seg[:-1]
    overlap = same & ((cs[1:] < ce[:-1]) | (fs[1:] < fe[:-1]))
    bad[seg[1:][overlap]] = True
    bad |= has & (counts == 0)
    problems: dict[int, str] = {}
    for row in np.nonzero(bad & has)[0].tolist():
        block = reader.units[reader.unit_offsets[row] : reader.unit_offsets[row + 1]]
        problems[row] = unit_problems(block, int(text_len[row]), int(reader.lengths[row])) or "inconsistent units"
    return problems
