"""Synthetic "speech" for the data tests: numpy noise bursts and tones written with soundfile."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

SR = 16000


def speechlike(seconds: float, seed: int, sr: int = SR, level_db: float = -20.0, pad: float = 0.15) -> np.ndarray:
    """Noise bursts under a syllable-rate envelope plus a tone: loud enough, not silent."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sr)
    t = np.arange(n) / sr
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4.0 * t) ** 2
    signal = envelope * (rng.standard_normal(n) * 0.5 + np.sin(2 * np.pi * (150 + 20 * seed % 7) * t))
    edge = int(pad * sr)  # quiet lead-in and tail, as a real recording has
    signal[:edge] *= 0.001
    signal[n - edge :] *= 0.001
    peak = np.abs(signal).max()
    return (signal / peak * 10 ** (level_db / 20)).astype(np.float32)


def write_clip(path: Path, audio: np.ndarray, sr: int = SR) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), audio, sr)
    return path


def make_corpus(root: Path, n: int = 6, speakers: tuple[str, ...] = ("ann", "bob"), seconds: float = 1.0,
                language: str = "en", suffix: str = ".wav") -> list[str]:
    """An LJSpeech-style folder (id|text|speaker|language) of ``n`` good clips; returns the lines."""
    lines = []
    for i in range(n):
        seg = f"{speakers[i % len(speakers)]}_{i:03d}"
        write_clip(root / "wavs" / f"{seg}{suffix}", speechlike(seconds + 0.1 * (i % 3), seed=i))
        lines.append(f"{seg}|hello world number {i}|{speakers[i % len(speakers)]}|{language}")
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


def write_store(path: Path, latents: list[np.ndarray], *, dim: int | None = None, chunk_frames: int = 64,
                dtype: str = "float16", texts: list[str] | None = None, splits: list[str] | None = None,
                units: list | None = None, languages: list[str] | None = None, frame_rate: float = 100.0) -> Path:
    """A store written directly with StoreWriter (no audio): one segment per latents array."""
    from flowkit.data.store import SegmentRecord, StoreWriter

    dim = dim if dim is not None else (latents[0].shape[1] if latents else 4)
    writer = StoreWriter.create(path, encoder_name="test", encoder_params={"dim": dim}, frame_rate=frame_rate,
                                sample_rate=16000, latent_dim=dim, latent_dtype=dtype, chunk_frames=chunk_frames)
    for i, lat in enumerate(latents):
        writer.add(SegmentRecord(
            segment_id=f"seg{i:05d}", speaker=f"spk{i % 3}", language=(languages or ["en"] * len(latents))[i],
            emotion="", intensity=float("nan"), rate=1 + i % 5, loudness=1 + (i * 2) % 5,
            split=(splits or ["train"] * len(latents))[i], text=(texts or [f"text {i} é"] * len(latents))[i],
            latents=lat, units=None if units is None else units[i], units_estimated=False,
        ))
    return writer.commit()
