"""``criterion.speaking_rate``: does the transcript fit the time the clip takes?

Characters of the normalised transcript (`flowkit.asr.normalise`, letters and digits
only) per second of speech (the clip less its leading and trailing silence). A speaker
reads a language at a steady rate; a transcript of another clip, a truncated recording or
one with a long pause inside moves the rate far from the speaker's. Works in every
language, with no model, which makes it the transcript check where the recogniser does not
know the language.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.curation.criteria.base import Decision, Threshold, by_group, robust_bounds
from flowkit.curation.criteria.signal import speech_span_seconds
from flowkit.registry import register

__all__ = ["SpeakingRate", "spoken_characters"]


def spoken_characters(text: str, language: str) -> int:
    """Letters and digits of ``text`` once normalised for scoring (numbers spelled out)."""
    from flowkit.asr.normalise import normalise_for_scoring

    return sum(ch.isalnum() for ch in normalise_for_scoring(text, language or "en"))


@register("criterion", "speaking_rate")
@attrs.define
class SpeakingRate:
    """Drops clips whose characters per second of speech are outliers for their speaker.

    Per speaker and language, both sides, on the logarithm of the rate (a rate twice the
    median is as far as half of it): a clip more than ``k`` robust standard deviations
    from the group's median is dropped. Clips with less than ``min_speech_s`` of speech or
    fewer than ``min_characters`` characters are left unjudged: on one short word the rate
    is mostly how that word sounds ("A M" is 2 characters and a second of speech, 2.2
    characters/s where the speaker's prompts read at about 9).

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
        values = []
        for m in measures:
            span, chars = m.get("speech_seconds"), m.get("characters")
            ok = span is not None and chars and chars >= self.min_characters and span >= self.min_speech_s
            values.append(float(chars) / float(span) if ok else float("nan"))
        logs = [float(np.log(v)) if np.isfinite(v) else float("nan") for v in values]

        def bounds(v: Sequence[float]) -> tuple[float, float, float | None, float | None]:
            return robust_bounds(v, k=self.k, side="both", min_scale=0.05)

        def describe(value: float, t: Threshold) -> str:
            lo, hi = np.exp(t.low), np.exp(t.high)
            return (f"speaking_rate: {np.exp(value):.1f} characters/s outside {lo:.1f}-{hi:.1f} "
                    f"(group {t.group}: median {np.exp(t.median):.1f})")

        reasons, log_thresholds = by_group([c.group for c in clips], logs, bounds, describe)
        thresholds = [Threshold(t.group, float(np.exp(t.median)), float(t.scale),
                                None if t.low is None else float(np.exp(t.low)),
                                None if t.high is None else float(np.exp(t.high)), t.clips)
                      for t in log_thresholds]
        unjudged = sum(not np.isfinite(v) for v in values)
        notes = [f"speaking_rate: {unjudged} clips with under {self.min_speech_s} s of speech or under "
                 f"{self.min_characters} characters, not judged"] if unjudged else []
        return Decision("speaking_rate", "characters per second of speech", values, reasons, thresholds, notes)

    def describe(self) -> dict[str, Any]:
        return {"name": "criterion.speaking_rate", **{k: v for k, v in attrs.asdict(self).items()}}
