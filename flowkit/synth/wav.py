"""Audio to WAV bytes (16-bit PCM), for files and for data URIs in reports; the audio
format of an output path."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from flowkit.errors import ConfigError

__all__ = ["output_format", "wav_bytes"]


def wav_bytes(audio: np.ndarray, sample_rate: int) -> bytes:
    """``audio [samples]`` float in [-1, 1] (clipped) at ``sample_rate`` Hz as a 16-bit PCM WAV file."""
    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0), int(sample_rate), format="WAV",
             subtype="PCM_16")
    return buffer.getvalue()


def output_format(path: Path, *, option: str = "--out") -> str:
    """The soundfile format ("WAV", "FLAC", "OGG", ...) that an audio file named ``path``
    is written in, from its extension.

    Raises:
        ConfigError: ``path`` is a folder, has no extension, or one soundfile cannot write;
            the message asks for a ``.wav`` path.
    """
    import soundfile as sf

    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{option} {path} is a folder; give the audio file to write, e.g. {path / 'speech.wav'}")
    suffix = path.suffix.lstrip(".").upper()
    if not suffix:
        raise ConfigError(f"{option} {path} has no audio extension; give a .wav path (or .flac, .ogg), "
                          f"e.g. {path.with_name(path.name + '.wav')}")
    if suffix not in sf.available_formats():
        raise ConfigError(f"{option} {path}: soundfile cannot write .{suffix.lower()} files; give a .wav path "
                          "(or .flac, .ogg)")
    return suffix
