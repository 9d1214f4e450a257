"""Unit timings from Montreal Forced Aligner TextGrid files (read with praatio).

MFA writes one TextGrid per clip with a ``words`` tier (and ``phones``). Each non-empty
word interval becomes a unit: its frame span is the interval's times x frame rate
(rounded, so neighbouring words share a boundary frame edge), its character span is
found by matching the word, case-insensitively and in order, in the segment's text.
"""

from __future__ import annotations

from pathlib import Path

#: MFA's placeholders for silence and out-of-vocabulary markers: not words of the text.
_SKIP_LABELS = {"", "sil", "sp", "spn", "<eps>", "<unk>"}


class TextGridError(Exception):
    """A TextGrid that cannot be used for a segment (the detail says why)."""


def read_word_intervals(path: Path, tier: str = "words") -> list[tuple[float, float, str]]:
    """``(start_s, end_s, label)`` of the non-empty intervals of ``tier`` in ``path``.

    Raises:
        TextGridError: unreadable file or no such tier.
    """
    from praatio import textgrid

    try:
        grid = textgrid.openTextgrid(str(path), includeEmptyIntervals=False)
    except Exception as exc:
        raise TextGridError(f"cannot read {path.name}: {type(exc).__name__}: {exc}") from None
    names = {name.lower(): name for name in grid.tierNames}
    if tier.lower() not in names:
        raise TextGridError(f"{path.name} has no {tier!r} tier (tiers: {', '.join(grid.tierNames)})")
    entries = grid.getTier(names[tier.lower()]).entries
    return [(float(e.start), float(e.end), str(e.label).strip()) for e in entries]


def units_from_intervals(
    intervals: list[tuple[float, float, str]], text: str, frame_rate: float, n_frames: int
) -> list[tuple[int, int, int, int]]:
    """Units ``(char_start, char_end, frame_start, frame_end)`` of the word ``intervals``.

    Raises:
        TextGridError: a word not found in ``text`` after the previous one, or a word
            whose frame span is empty after rounding.
    """
    lowered = text.lower()
    units: list[tuple[int, int, int, int]] = []
    pos = 0
    for start_s, end_s, label in intervals:
        if label.lower() in _SKIP_LABELS:
            continue
        at = lowered.find(label.lower(), pos)
        if at < 0:
            raise TextGridError(f"word {label!r} ({start_s:.2f}s) not found in the text after char {pos}")
        fs = min(n_frames, max(0, round(start_s * frame_rate)))
        fe = min(n_frames, max(0, round(end_s * frame_rate)))
        if units:
            fs = max(fs, units[-1][3])
        if fe <= fs:
            raise TextGridError(f"word {label!r} ({start_s:.2f}-{end_s:.2f}s) has no frames at {frame_rate:g} Hz")
        units.append((at, at + len(label), fs, fe))
        pos = at + len(label)
    return units
