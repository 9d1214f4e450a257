"""Aligners: estimated word timings for data without a forced alignment.

``aligner.energy`` finds the speech between the first and last frame whose energy rises
within ``floor_db`` of the clip's loudest frame, and divides those frames among the
words in proportion to their character counts. It knows nothing of phonetics: its
timings are estimates, stored with ``units_estimated = True`` so nothing downstream
mistakes them for a forced alignment.
"""

from __future__ import annotations

import re

import attrs
import numpy as np

from flowkit.data.audio import speech_span
from flowkit.registry import register

_WORD = re.compile(r"\S+")


def word_char_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of the whitespace-separated words of ``text``."""
    return [(m.start(), m.end()) for m in _WORD.finditer(text)]


@register("aligner", "energy")
@attrs.frozen
class EnergyAligner:
    """Word timings from the energy envelope, split by character counts (an estimate)."""

    floor_db: float = 35.0  # frames within this many dB of the loudest count as speech
    absolute_db: float = -60.0  # ... and only when louder than this (dBFS)

    def align(
        self, text: str, audio: np.ndarray, sample_rate: int, frame_rate: float, n_frames: int | None = None
    ) -> list[tuple[int, int, int, int]]:
        """Units ``(char_start, char_end, frame_start, frame_end)`` (ends exclusive), one per word.

        ``n_frames`` is the encoder's frame count (default ``len(audio) / sample_rate *
        frame_rate``). Returns ``[]`` when there is no word, no speech, or fewer speech
        frames than words (no honest split exists).
        """
        words = word_char_spans(text)
        hop = max(1, round(sample_rate / frame_rate))
        if n_frames is None:
            n_frames = int(len(audio) / sample_rate * frame_rate)
        start, end = speech_span(audio, hop, n_frames, self.floor_db, self.absolute_db)
        if not words or end - start < len(words):
            return []
        weights = np.array([e - s for s, e in words], dtype=np.float64)
        # cumulative rounding keeps the boundaries monotonic and the total exact
        edges = np.round(start + np.concatenate([[0.0], np.cumsum(weights)]) / weights.sum() * (end - start))
        edges = edges.astype(np.int64)
        # every word gets at least one frame: push boundaries forward, then back from the end
        for k in range(1, len(edges)):
            edges[k] = max(edges[k], edges[k - 1] + 1)
        edges[-1] = end
        for k in range(len(edges) - 2, -1, -1):
            edges[k] = min(edges[k], edges[k + 1] - 1)
        return [(s, e, int(edges[k]), int(edges[k + 1])) for k, (s, e) in enumerate(words)]
