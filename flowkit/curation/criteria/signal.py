"""Criteria read off the waveform alone: clipping (``criterion.clipping``) and the share of
silence (``criterion.silence``). No model; microseconds a clip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.curation.criteria.base import Decision, Threshold, by_group, robust_bounds
from flowkit.registry import register

__all__ = ["Clipping", "Silence", "silent_frames", "speech_span_seconds"]

FRAME_S = 0.010  # s: the 10 ms frames levels are measured on (as prepare's silence check)


def silent_frames(audio: np.ndarray, sample_rate: int, silence_dbfs: float) -> np.ndarray:
    """``[n_frames]`` bool: the 10 ms frames whose RMS level is below ``silence_dbfs``."""
    from flowkit.data.audio import frame_levels_db

    hop = max(1, int(round(FRAME_S * sample_rate)))
    return frame_levels_db(np.asarray(audio, dtype=np.float32), hop) < float(silence_dbfs)


def speech_span_seconds(audio: np.ndarray, sample_rate: int, silence_dbfs: float) -> float:
    """Seconds from the first to the last frame above ``silence_dbfs`` (0.0 when none is):
    the clip without its leading and trailing silence."""
    loud = np.flatnonzero(~silent_frames(audio, sample_rate, silence_dbfs))
    return 0.0 if loud.size == 0 else float(loud[-1] - loud[0] + 1) * FRAME_S


def _share_reason(name: str, what: str) -> Any:
    def describe(value: float, t: Threshold) -> str:
        return f"{name}: {what} {value:.3f} > {t.high:.3f} (group {t.group}: median {t.median:.3f})"
    return describe


@register("criterion", "clipping")
@attrs.frozen
class Clipping:
    """Drops clipped recordings: the share of samples at full scale.

    A sample counts as clipped when ``|x| >= level`` (decoded PCM: 0.999 of full scale).
    The bound is absolute, not per speaker: clipping is a defect whatever a speaker's other
    clips do. Clean speech touches full scale in a few samples at most; ``max_share`` 0.001
    (16 samples a second at 16 kHz) is flat tops of a clipped waveform, not peaks.

    Args:
        level: the magnitude from which a sample counts as clipped (0-1].
        max_share: the largest share of clipped samples kept.
    """

    level: float = 0.999
    max_share: float = 0.001

    def measure(self, clip: Any) -> dict[str, Any]:
        x = np.abs(np.asarray(clip.audio, dtype=np.float32))
        return {"clipped_share": float(np.mean(x >= self.level)) if x.size else 0.0}

    def decide(self, clips: Sequence[Any], measures: Sequence[Mapping[str, Any]]) -> Decision:
        values = [float(m.get("clipped_share", np.nan)) for m in measures]
        reasons: list[str | None] = [
            f"clipping: {v:.4f} of the samples at full scale > {self.max_share}"
            if np.isfinite(v) and v > self.max_share else None for v in values]
        everyone = Threshold("all", float(np.nanmedian(values)) if values else float("nan"), 0.0, None,
                             self.max_share, int(np.isfinite(values).sum()))
        return Decision("clipping", "share of samples at full scale", values, reasons, [everyone])

    def describe(self) -> dict[str, Any]:
        return {"name": "criterion.clipping", "level": self.level, "max_share": self.max_share}


@register("criterion", "silence")
@attrs.frozen
class Silence:
    """Drops clips that are mostly silence: the share of 10 ms frames below ``silence_dbfs``.

    Per speaker and language (a speaker's prompts share their recording's padding), high
    side: a clip more than ``k`` robust standard deviations above its group's median share,
    and above ``floor`` (a clip at most 60 % silent is kept: short studio prompts carry
    their padding), is dropped; a clip over ``max_share`` silent (nothing but a breath) is
    dropped whatever its group does.

    Args:
        silence_dbfs: frames below this RMS level are silence (prepare's ``silence_dbfs``).
        k: robust standard deviations above the group median that flag a clip.
        floor: shares up to this are never flagged by the group rule.
        max_share: shares above this are always flagged.
    """

    silence_dbfs: float = -50.0
    k: float = 4.0
    floor: float = 0.6
    max_share: float = 0.95

    def measure(self, clip: Any) -> dict[str, Any]:
        frames = silent_frames(clip.audio, clip.sample_rate, self.silence_dbfs)
        return {"silence_share": float(np.mean(frames)) if frames.size else 1.0}

    def decide(self, clips: Sequence[Any], measures: Sequence[Mapping[str, Any]]) -> Decision:
        values = [float(m.get("silence_share", np.nan)) for m in measures]

        def bounds(v: Sequence[float]) -> tuple[float, float, float | None, float | None]:
            median, scale, low, high = robust_bounds(v, k=self.k, side="high", min_scale=0.02, floor=self.floor)
            return median, scale, low, None if high is None else min(high, self.max_share)

        reasons, thresholds = by_group([c.group for c in clips], values, bounds,
                                       _share_reason("silence", "share of silent 10 ms frames"))
        return Decision("silence", f"share of 10 ms frames below {self.silence_dbfs:g} dBFS", values, reasons,
                        thresholds)

    def describe(self) -> dict[str, Any]:
        return {"name": "criterion.silence", **attrs.asdict(self)}
