"""Several short clips through one Whisper window: the layout and who said which word.

Whisper's encoder reads a fixed 30 s window whatever the clip's length (Radford et al. 2022,
sec. 2.2), so a 2 s prompt costs as much as 30 s of speech, and on a CPU the encoder is most of
tiny.en's time on such a prompt. Judging a corpus of prompts, `pack_windows` lays
several clips in one window with ``gap_s`` of silence between them, Whisper transcribes the
window with word timestamps, and `assign_words` gives each word to the clip whose span holds
the word's midpoint (the nearest span when it falls in a gap). A gap of 2 s keeps most
words on their own clip: at 1 s the end of one prompt was often heard as the start of the
next (figures: docs/performance.md, "Curation"); a caller that acts on a clip's words
checks the suspicious ones alone (`flowkit.curation.criteria.transcript`).

A clip's words then depend on its neighbours in the window: the layout is a function of the
clips' order and lengths only, so the same clips in the same order give the same words.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["assign_words", "pack_windows", "packed_audio"]


def pack_windows(seconds: Sequence[float], *, gap_s: float, window_s: float) -> list[list[int]]:
    """Clip indices per window, in order: each window holds consecutive clips whose lengths
    plus a ``gap_s`` between neighbours fit in ``window_s``; a clip longer than ``window_s``
    is a window of its own.

    Raises:
        ValueError: ``gap_s`` < 0 or ``window_s`` <= 0.
    """
    if gap_s < 0 or window_s <= 0:
        raise ValueError(f"pack_windows: gap_s = {gap_s} must be >= 0 and window_s = {window_s} > 0")
    windows: list[list[int]] = []
    length = 0.0
    for i, s in enumerate(seconds):
        if windows and windows[-1] and length + gap_s + float(s) <= window_s:
            windows[-1].append(i)
            length += gap_s + float(s)
        else:
            windows.append([i])
            length = float(s)
    return windows


def packed_audio(clips: Sequence[np.ndarray], sample_rate: int,
                 gap_s: float) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """``(audio [samples], spans)``: ``clips`` (each ``[samples]`` float32) joined with
    ``gap_s`` of zeros between neighbours, and each clip's ``(start_s, end_s)`` in it."""
    gap = np.zeros(int(round(gap_s * sample_rate)), dtype=np.float32)
    parts: list[np.ndarray] = []
    spans = []
    position = 0
    for i, x in enumerate(clips):
        if i:
            parts.append(gap)
            position += gap.size
        spans.append((position / sample_rate, (position + x.size) / sample_rate))
        parts.append(np.asarray(x, dtype=np.float32))
        position += x.size
    return (np.concatenate(parts) if parts else np.zeros(0, np.float32)), spans


def assign_words(words: Sequence[tuple[float, float, str]], spans: Sequence[tuple[float, float]]) -> list[str]:
    """Each clip's text: the ``(start_s, end_s, word)`` whose midpoint lies in the clip's
    span (or is nearest to it), joined by spaces in the order given."""
    out: list[list[str]] = [[] for _ in spans]
    if not spans:
        return []
    for start, end, word in words:
        mid = 0.5 * (float(start) + float(end))
        distance = [0.0 if a <= mid <= b else min(abs(mid - a), abs(mid - b)) for a, b in spans]
        out[int(np.argmin(distance))].append(word.strip())
    return [" ".join(w for w in ws if w) for ws in out]
