"""Audio to WAV bytes (16-bit PCM), for files and for data URIs in reports."""

from __future__ import annotations

import io

import numpy as np

__all__ = ["wav_bytes"]


def wav_bytes(audio: np.ndarray, sample_rate: int) -> bytes:
    """``audio [samples]`` float in [-1, 1] (clipped) at ``sample_rate`` Hz as a 16-bit PCM WAV file."""
    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0), int(sample_rate), format="WAV", subtype="PCM_16")
    return buffer.getvalue()
