"""Audio decoding, resampling and level measures used by prepare.

Audio is float32 mono in [-1, 1]. Levels are in dBFS (0 dB = full-scale sine peak
amplitude 1); loudness is ITU-R BS.1770-4 integrated loudness in LUFS (pyloudnorm).
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import numpy as np

#: Formats looked for next to an LJSpeech-style id, in this order.
AUDIO_SUFFIXES: tuple[str, ...] = (".wav", ".flac", ".ogg")

_EPS = 1e-10
#: Peak (in full scales) above which a clip is rejected: only float files can pass 1.0, and
#: a few dB over is a mastering overshoot; far over is a file written with the wrong scale.
MAX_PEAK = 2.0


class AudioError(Exception):
    """A clip that cannot be decoded; ``reason`` is the rejection reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def load_audio(path: Path | BinaryIO, sample_rate: int) -> np.ndarray:
    """Decode ``path`` (a file, or an open binary file such as encoded bytes in a
    ``BytesIO``) with soundfile, mix down to mono and resample to ``sample_rate`` (soxr HQ).

    Returns:
        float32 ``[samples]`` at ``sample_rate`` Hz.

    Raises:
        AudioError: reason ``unreadable`` (missing, truncated or undecodable file) or
            ``empty`` (no samples).
    """
    import soundfile as sf

    try:
        audio, sr = sf.read(path if hasattr(path, "read") else str(path), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile raises LibsndfileError, RuntimeError, OSError...
        raise AudioError("unreadable", f"{type(exc).__name__}: {exc}") from None
    return mono_resampled(audio, int(sr), sample_rate)


def mono_resampled(audio: np.ndarray, sr: int, sample_rate: int) -> np.ndarray:
    """``audio`` ``[samples channels]`` at ``sr`` Hz, mixed to mono and resampled to ``sample_rate`` (soxr HQ).

    Returns:
        float32 ``[samples]``.

    Raises:
        AudioError: ``empty`` (no samples), ``unreadable`` (non-finite samples) or
            ``over_full_scale`` (a float file whose peak is above `MAX_PEAK`).
    """
    import soxr

    if audio.shape[0] == 0:
        raise AudioError("empty", "the file holds no samples")
    audio = audio.astype(np.float32, copy=False)
    peak = float(np.abs(audio).max()) if np.isfinite(audio).all() else 0.0
    if peak > MAX_PEAK:
        raise AudioError("over_full_scale", f"its peak is {peak:.3g}x full scale (audio is read in [-1, 1]): a float "
                         "file written unscaled (e.g. 16-bit sample values stored as float); rescale it")
    mono = audio.mean(axis=1, dtype=np.float32) if audio.shape[1] > 1 else audio[:, 0]
    if sr != sample_rate:
        mono = soxr.resample(mono, sr, sample_rate, quality="HQ").astype(np.float32, copy=False)
    if not np.isfinite(mono).all():
        raise AudioError("unreadable", "decoded samples are not finite")
    return np.ascontiguousarray(mono)


def frame_levels_db(audio: np.ndarray, hop: int) -> np.ndarray:
    """RMS level in dBFS of each non-overlapping ``hop``-sample frame: ``[n_frames]``."""
    n = max(1, len(audio) // hop)
    padded = np.zeros(n * hop, dtype=np.float32)
    take = min(len(audio), n * hop)
    padded[:take] = audio[:take]
    power = np.mean(padded.reshape(n, hop).astype(np.float64) ** 2, axis=1)
    # +3.01 dB so a full-scale sine reads 0 dBFS, as a level meter does
    return 10.0 * np.log10(power + _EPS) + 3.0103


def active_level_db(audio: np.ndarray, sample_rate: int) -> float:
    """95th percentile of the 10 ms frame levels (dBFS): the level of the clip's loud parts.

    A percentile rather than the peak, so one click does not make silence count as speech.
    """
    hop = max(1, sample_rate // 100)
    return float(np.percentile(frame_levels_db(audio, hop), 95))


def integrated_loudness(audio: np.ndarray, sample_rate: int) -> float:
    """ITU-R BS.1770 integrated loudness in LUFS; nan when the clip is too short (< 0.4 s) or gated out."""
    import pyloudnorm

    if len(audio) < int(0.4 * sample_rate) + 1:
        return float("nan")
    try:
        value = pyloudnorm.Meter(sample_rate).integrated_loudness(audio.astype(np.float64))
    except ValueError:
        return float("nan")
    return float(value) if np.isfinite(value) else float("nan")


def speech_span(
    audio: np.ndarray, hop: int, n_frames: int, floor_db: float = 35.0, absolute_db: float = -60.0
) -> tuple[int, int]:
    """Frames ``[start, end)`` between the first and last frame within ``floor_db`` of the
    loudest frame and above ``absolute_db`` dBFS.

    Frames are ``hop`` samples long, clipped to ``n_frames`` (the encoder's frame count).
    Returns ``(0, 0)`` when nothing rises above the floors (digital silence).
    """
    levels = frame_levels_db(audio, hop)[:n_frames]
    if levels.size == 0:
        return 0, 0
    active = np.nonzero((levels > levels.max() - floor_db) & (levels > absolute_db))[0]
    if active.size == 0:
        return 0, 0
    return int(active[0]), int(active[-1]) + 1
