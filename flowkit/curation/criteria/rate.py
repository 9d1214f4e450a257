"""``criterion.speaking_rate``: does the transcript fit the time the clip takes?

Characters of the normalised transcript (`flowkit.judges.normalise`, letters and digits
only) against seconds of speech (the clip less its leading and trailing silence). A
speaker reads a language at a steady pace, plus a roughly fixed time to start and stop;
within each speaker and language a straight line, seconds = a + b x characters, is fitted
robustly (Theil-Sen: the median of the slopes between every two clips, Theil 1950 and Sen
1968; the intercept is the median residual), and each clip's measure is its speech time
over the line's time for its characters. Where the prompts are a word or two, their times
say little about their lengths and the slope comes out flat: a line whose slope is under a
quarter of the group's median seconds per character gives way to the proportional one
(seconds = characters x that median). A transcript of another clip, a truncated
recording or one with a long pause inside lies far from 1. Works in every language, with
no model: the transcript check where no recogniser knows the language.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.curation.criteria.base import MIN_GROUP, Decision, Threshold, by_group, robust_bounds
from flowkit.curation.criteria.signal import speech_span_seconds
from flowkit.registry import register

__all__ = ["SpeakingRate", "fitted_line", "spoken_characters", "theil_sen"]

#: the least time the fitted line may give (s): a fit on short prompts can cross zero
MIN_EXPECTED_S = 0.1


def spoken_characters(text: str, language: str) -> int:
    """Letters and digits of ``text`` once normalised for scoring (numbers spelled out)."""
    from flowkit.judges.normalise import normalise_for_scoring

    return sum(ch.isalnum() for ch in normalise_for_scoring(text, language or "en"))


#: a fitted slope under this share of the median seconds per character is taken as flat
MIN_SLOPE_SHARE = 0.25


def fitted_line(chars: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
    """``(intercept, slope)`` of seconds against characters (module docstring); nan without data."""
    if chars.size == 0:
        return float("nan"), float("nan")
    per_char = float(np.median(seconds / chars))
    intercept, slope = theil_sen(chars, seconds) if chars.size >= 2 else (0.0, 0.0)
    return (intercept, slope) if slope >= MIN_SLOPE_SHARE * per_char else (0.0, per_char)


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(intercept, slope)`` of the Theil-Sen line through ``(x [n], y [n])``: the median of
    the slopes of every pair with different x, and the median of ``y - slope x``.
    ``(median y, 0)`` when no two x differ."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    i, j = np.triu_indices(x.size, k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    slope = float(np.median((y[j] - y[i])[keep] / dx[keep])) if keep.any() else 0.0
    return float(np.median(y - slope * x)), slope


@register("criterion", "speaking_rate")
@attrs.define
class SpeakingRate:
    """Drops clips whose speech time does not fit their transcript's length for their speaker.

    Per speaker and language (a group with fewer than 12 judged clips takes the line and
    the statistics of the whole corpus), both sides, on the logarithm of speech time over
    the fitted time (twice the time is as far as half of it): a clip more than ``k``
    robust standard deviations from the group's median is dropped. Clips with less than
    ``min_speech_s`` of speech or fewer than ``min_characters`` characters are left
    unjudged: on one short word the time is mostly how that word sounds ("A M" is 2
    characters and a second of speech).

    Args:
        silence_dbfs: frames below this RMS level are silence (trimmed from both ends).
        k: robust standard deviations from the group median that flag a clip.
        min_speech_s: clips with less speech than this (seconds) are not judged.
        min_characters: clips with fewer characters than this are not judged.
    """

    silence_dbfs: float = -50.0
    k: float = 4.0
    min_speech_s: float = 0.5
    min_characters: int = 6

    def measure(self, clip: Any) -> dict[str, Any]:
        span = speech_span_seconds(clip.audio, clip.sample_rate, self.silence_dbfs)
        return {"speech_seconds": span, "characters": spoken_characters(clip.info.text, clip.info.language)}

    def decide(self, clips: Sequence[Any], measures: Sequence[Mapping[str, Any]]) -> Decision:
        span = np.asarray([float(m.get("speech_seconds") or 0.0) for m in measures], dtype=np.float64)
        chars = np.asarray([float(m.get("characters") or 0) for m in measures], dtype=np.float64)
        judged = (chars >= self.min_characters) & (span >= self.min_speech_s)
        groups = [c.group for c in clips]
        lines: dict[str, tuple[float, float]] = {}
        everyone = fitted_line(chars[judged], span[judged])
        for group in sorted(set(groups)):
            mine = judged & np.asarray([g == group for g in groups])
            lines[group] = fitted_line(chars[mine], span[mine]) if mine.sum() >= MIN_GROUP else everyone
        expected = np.asarray([max(lines[g][0] + lines[g][1] * c, MIN_EXPECTED_S) for g, c in zip(groups, chars,
                                                                                                   strict=True)])
        ratio = np.where(judged, span / expected, np.nan)
        logs = np.log(ratio)

        def bounds(v: Sequence[float]) -> tuple[float, float, float | None, float | None]:
            return robust_bounds(v, k=self.k, side="both", min_scale=0.05)

        def describe(value: float, t: Threshold) -> str:
            return (f"speaking_rate: speech {np.exp(value):.2f}x the time group {t.group} takes for as many "
                    f"characters, outside {np.exp(t.low):.2f}-{np.exp(t.high):.2f}x")

        reasons, log_thresholds = by_group(groups, logs.tolist(), bounds, describe)
        for k in np.flatnonzero(np.asarray([r is not None for r in reasons])):
            reasons[k] += f" ({span[k]:.2f} s for {int(chars[k])} characters; expected {expected[k]:.2f} s)"
        thresholds = [Threshold(t.group, float(np.exp(t.median)), float(t.scale),
                                None if t.low is None else float(np.exp(t.low)),
                                None if t.high is None else float(np.exp(t.high)), t.clips)
                      for t in log_thresholds]
        unjudged = int((~judged).sum())
        notes = [f"speaking_rate: {unjudged} clips with under {self.min_speech_s} s of speech or under "
                 f"{self.min_characters} characters, not judged"] if unjudged else []
        return Decision("speaking_rate", "speech time over the group's time for as many characters", ratio.tolist(),
                        reasons, thresholds, notes)

    def describe(self) -> dict[str, Any]:
        return {"name": "criterion.speaking_rate", **attrs.asdict(self)}
