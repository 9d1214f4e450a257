"""Fixtures of the trainer tests: a small synthetic latent store written with the data
engineer's `StoreWriter`, and the argv of the flowkit CLI.

The store: 3 speakers x 10 segments (8 train, 2 val each), 8 latent channels, 40-120
frames, word timings (units) and emotions, so every text path and pairing can run. The
latents follow the text (a smooth pattern per character plus noise): a model can learn
them, so a loss that falls means something.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
WORDS = ("la", "mora", "tie", "sun", "kell", "vo", "ambe", "rit")
EMOTION_NAMES = ("neutral", "happy", "sad", "")


def write_store(path: Path, *, seed: int = 0, n_speakers: int = 3, per_speaker: int = 10, latent_dim: int = 8) -> Path:
    """Write a small store at ``path`` and return it."""
    from flowkit.data.store import SegmentRecord, StoreWriter

    rng = np.random.default_rng(seed)
    writer = StoreWriter.create(
        path, encoder_name="synthetic", encoder_params={"dim": latent_dim}, frame_rate=100.0,
        sample_rate=16000, latent_dim=latent_dim, latent_dtype="float32",
    )
    for s in range(n_speakers):
        for k in range(per_speaker):
            words = [WORDS[i] for i in rng.integers(0, len(WORDS), size=rng.integers(2, 5))]
            text = " ".join(words)
            frames_per_char = int(rng.integers(4, 7))
            units, pos, frame = [], 0, 0
            for w in words:
                n = len(w) * frames_per_char
                units.append((pos, pos + len(w), frame, frame + n))
                pos += len(w) + 1
                frame += n + 2  # a short pause between words
            n_frames = frame
            t = np.arange(n_frames)[:, None]
            channels = np.arange(latent_dim)[None, :]
            latents = np.sin(0.05 * t * (1 + channels) + s) + 0.1 * rng.standard_normal((n_frames, latent_dim))
            writer.add(SegmentRecord(
                segment_id=f"spk{s}_{k:02d}", speaker=f"spk{s}", language="en",
                emotion=EMOTION_NAMES[k % len(EMOTION_NAMES)], intensity=0.5 if k % 4 != 3 else math.nan,
                rate=int(1 + k % 5), loudness=int(1 + s % 5), split="val" if k >= per_speaker - 2 else "train",
                text=text, latents=latents.astype(np.float32), units=tuple(units),
            ))
    return writer.commit()


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("store") / "tiny.zarr")


@pytest.fixture(scope="session")
def other_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same layout with other latents (another fingerprint)."""
    return write_store(tmp_path_factory.mktemp("store2") / "other.zarr", seed=1)
