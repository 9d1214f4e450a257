"""Real clips for the curation tests: the bundled demo recordings (flowkit/demo/clips), decoded
as the curation decodes them, and the corruptions the criteria must find."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flowkit.curation.clips import ClipAudio, ClipInfo, load_clip, read_source


def demo_group(root: Path, speaker: str, language: str, n: int, *, min_seconds: float = 0.8) -> list[ClipAudio]:
    """The first ``n`` clips (source order) of one speaker and language with at least ``min_seconds``."""
    items, _ = read_source([root])
    out = []
    for item in items:
        if item.speaker == speaker and item.language == language:
            clip = load_clip(item)
            if clip.audio.size >= min_seconds * clip.sample_rate:
                out.append(clip)
        if len(out) == n:
            break
    assert len(out) == n, f"the demo clips hold fewer than {n} clips of {speaker}/{language}"
    return out


def with_audio(clip: ClipAudio, audio: np.ndarray) -> ClipAudio:
    return ClipAudio(clip.info, np.asarray(audio, dtype=np.float32), clip.sample_rate)


def with_info(clip: ClipAudio, **changes: str) -> ClipAudio:
    fields = {"segment_id": clip.info.segment_id, "text": clip.info.text, "speaker": clip.info.speaker,
              "language": clip.info.language, "audio": clip.info.audio, **changes}
    return ClipAudio(ClipInfo(**fields), clip.audio, clip.sample_rate)


def noisy(audio: np.ndarray, snr_db: float, seed: int = 0) -> np.ndarray:
    """``audio`` plus white noise at ``snr_db`` below its mean power, scaled down where it would clip."""
    noise = np.random.default_rng(seed).standard_normal(audio.size)
    noise *= np.sqrt(np.mean(audio.astype(np.float64) ** 2) / np.mean(noise ** 2) / 10 ** (snr_db / 10))
    mix = audio + noise
    return (mix / max(1.0, float(np.max(np.abs(mix))) / 0.99)).astype(np.float32)


def decide(criterion, clips: list[ClipAudio]):
    """``criterion``'s `Decision` on ``clips`` measured as a curation measures them: together
    where the criterion measures many at once, else one by one."""
    if hasattr(criterion, "measure_many"):
        return criterion.decide([c.info for c in clips], criterion.measure_many(clips))
    return criterion.decide([c.info for c in clips], [criterion.measure(c) for c in clips])
