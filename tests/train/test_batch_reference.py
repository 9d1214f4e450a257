"""The array batch path (pairing spans as arrays, one buffered read per store converted at
once, collate filling preallocated arrays) builds exactly what the per-item path built:
every tensor equal, the same pairing outcomes, the data stream left in the same state.

The reference is `batch_reference` (the per-item code as it was). The store holds float16
latents (the torch conversion path), segments long enough for cross-segment prompts cut
to unit windows, a segment without a speaker and a speaker with one segment (fallbacks).
"""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import batch_reference
import numpy as np
import pytest
import torch

from flowkit.batching.builder import BatchBuilder
from flowkit.batching.collate import CFGDrop
from flowkit.batching.pairing import CrossSegment, InClip
from flowkit.data.dataset import LatentDataset
from flowkit.data.stats import compute_latent_stats
from flowkit.data.store import SegmentRecord, StoreWriter
from flowkit.text.chars import build_vocab

WORDS = ("la", "mora", "tie", "sun", "kell", "vo", "ambe", "rit", "é")
EMOTIONS = ("neutral", "happy", "sad", "")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    writer = StoreWriter.create(
        tmp_path_factory.mktemp("ref") / "f16.zarr", encoder_name="synthetic", encoder_params={"dim": 6},
        frame_rate=100.0, sample_rate=16000, latent_dim=6, latent_dtype="float16",
    )
    speakers = ["a"] * 12 + ["b"] * 10 + ["c"] * 8 + [""] * 3 + ["lonely"]
    for k, spk in enumerate(speakers):
        words = [WORDS[i] for i in rng.integers(0, len(WORDS), size=rng.integers(2, 9))]
        units, pos, frame = [], 0, 0
        per_char = int(rng.integers(3, 9))
        for w in words:
            units.append((pos, pos + len(w), frame, frame + len(w) * per_char))
            pos += len(w) + 1
            frame += len(w) * per_char + int(rng.integers(0, 4))
        latents = 3 * rng.standard_normal((frame, 6)) + np.arange(6)
        writer.add(SegmentRecord(
            segment_id=f"s{k:02d}", speaker=spk, language=("en", "fr", "de")[k % 3], emotion=EMOTIONS[k % 4],
            intensity=0.25 * (k % 5) if k % 6 else math.nan, rate=k % 6, loudness=(k * 7) % 6, split="train",
            text=" ".join(words), latents=latents.astype(np.float16), units=tuple(units),
        ))
    return writer.commit()


PAIRINGS = {
    "in_clip": InClip(min_target_frac=0.4, max_target_frac=1.0),
    # prompts of 12..48 frames: long partners are cut to unit windows, short ones fall back
    "cross": CrossSegment(cross_p=0.7, min_prompt_frames=12, max_prompt_frames=48, min_target_frac=0.5),
}


def _assert_same_batch(new, ref) -> None:
    for name in ("num_target_frames", "num_real_frames", "num_chars", "segment_ids", "prompt_segment_ids"):
        assert getattr(new, name) == getattr(ref, name), name
    assert new.x1.dtype == ref.x1.dtype and torch.equal(new.x1, ref.x1)
    for field in attrs.fields(type(ref.cond)):
        a, b = getattr(new.cond, field.name), getattr(ref.cond, field.name)
        if isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, field.name
            assert torch.equal(a, b), field.name
        else:
            assert a == b, field.name


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
@pytest.mark.parametrize("pairing", sorted(PAIRINGS))
@pytest.mark.parametrize("train", [True, False])
def test_batches_equal_the_per_item_reference(store: Path, text_path: str, pairing: str, train: bool) -> None:
    ds = LatentDataset.open([store], "train", require_units=True)
    segments = ds.segments
    vocab, ref_vocab = build_vocab(segments.texts()), build_vocab(segments.texts())
    builder = BatchBuilder(ds, PAIRINGS[pairing], compute_latent_stats(ds), vocab, ["en", "fr"], text_path,
                           CFGDrop(text_p=0.1, prompt_p=0.3, both_p=0.2), row_frames=64 if train else None)
    reference = attrs.evolve(builder, vocab=ref_vocab)
    rng, ref_rng = np.random.default_rng(11), np.random.default_rng(11)
    order = np.random.default_rng(5).permutation(len(ds)).tolist()
    outcomes = set()
    for start in range(0, len(order), 9):
        indices = order[start : start + 9]
        batch, counts = builder.build(indices, rng, train=train)
        ref_batch, ref_plans = batch_reference.build(reference, indices, ref_rng, train=train)
        _assert_same_batch(batch, ref_batch)
        assert counts == counts.of(ref_plans)
        assert rng.bit_generator.state == ref_rng.bit_generator.state
        outcomes.update(p.fallback or ("cross" if p.cross else "in_clip") for p in ref_plans)
        outcomes.update("window" for p in ref_plans if p.prompt_chars is not None)
    assert vocab.unknown_count == ref_vocab.unknown_count
    if pairing == "cross":  # the store reaches every branch of the cross-segment plan
        assert {"cross", "in_clip", "window", "no_speaker", "no_other_segment"} <= outcomes
