"""Collation: masks, prompt, text and unit tensors, CFG dropout, padding invariance."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest
import torch

from flowkit.batching.collate import Batch, CFGDrop, collate
from flowkit.batching.pairing import CrossSegment, InClip, ItemPlan, needed_indices
from flowkit.data.dataset import SegmentInfo
from flowkit.data.stats import LatentStats
from flowkit.errors import ConfigError, DataError
from flowkit.text.chars import build_vocab

D = 3
FPC = 2  # frames per character in the synthetic unit timings
LANGUAGES = ("en", "fr")
STATS = LatentStats(
    mean=np.array([1.0, -1.0, 0.5], np.float32),
    std=np.array([2.0, 0.5, 1.0], np.float32),
    n_frames=1,
)


def word_units(text: str) -> tuple[tuple[int, int, int, int], ...]:
    units, pos = [], 0
    for word in text.split(" "):
        units.append((pos, pos + len(word), pos * FPC, (pos + len(word)) * FPC))
        pos += len(word) + 1
    return tuple(units)


def make_data():
    texts = ["hello big world", "one two", "a quick brown fox jumps", "yes"]
    meta = [
        ("s1", "en", "happy", 0.8, 2, 3),
        ("s1", "fr", "", math.nan, 0, 0),
        ("s1", "de", "sad", math.nan, 5, 1),
        ("s2", "en", "neutral", 0.1, 1, 5),
    ]
    segs, latents = [], {}
    rng = np.random.default_rng(0)
    for i, (text, (spk, lang, emo, inten, rate, loud)) in enumerate(zip(texts, meta, strict=True)):
        n = len(text) * FPC + 1  # one trailing frame outside every unit
        segs.append(
            SegmentInfo(
                store=0,
                row=i,
                segment_id=f"seg{i}",
                speaker=spk,
                language=lang,
                emotion=emo,
                intensity=inten,
                rate=rate,
                loudness=loud,
                split="train",
                text=text,
                n_frames=n,
                units=word_units(text),
                units_estimated=False,
            )
        )
        latents[i] = rng.normal(size=(n, D)).astype(np.float16)
    vocab = build_vocab(texts)
    return segs, latents, vocab


def run(plans, segs, latents, vocab, *, text_path="unaligned", cfg=CFGDrop(), rng=None) -> Batch:
    return collate(
        plans,
        segs,
        latents,
        vocab=vocab,
        stats=STATS,
        languages=LANGUAGES,
        text_path=text_path,
        cfg_drop=cfg,
        rng=rng,
    )


def test_masks_prompt_and_latents():
    segs, latents, vocab = make_data()
    plans = [ItemPlan(0, (3, 10), 0), ItemPlan(3, (0, segs[3].n_frames), 3)]
    batch = run(plans, segs, latents, vocab)
    n0, n3 = segs[0].n_frames, segs[3].n_frames
    assert batch.x1.shape == (2, n0, D) and batch.x1.dtype == torch.float32
    c = batch.cond
    assert c.frame_mask.sum(1).tolist() == [n0, n3]
    assert c.target_mask[0].nonzero().flatten().tolist() == list(range(3, 10))
    assert c.target_mask[1].sum() == n3
    assert not (c.target_mask & ~c.frame_mask).any()
    expected = (latents[0].astype(np.float32) - STATS.mean) / STATS.std
    np.testing.assert_allclose(batch.x1[0].numpy(), expected, rtol=1e-6)
    assert (batch.x1[1, n3:] == 0).all()
    visible = c.frame_mask & ~c.target_mask
    assert torch.equal(c.prompt[visible], batch.x1[visible])
    assert (c.prompt[~visible] == 0).all()
    assert batch.num_target_frames == 7 + n3
    assert batch.num_real_frames == n0 + n3
    assert batch.num_chars == len("hello big world") + len("yes")
    assert batch.segment_ids == ["seg0", "seg3"] == batch.prompt_segment_ids
    assert c.char_unit is None


def test_text_and_labels():
    segs, latents, vocab = make_data()
    plans = InClip().plan([0, 1, 2, 3], segs, np.random.default_rng(0))
    c = run(plans, segs, latents, vocab).cond
    assert vocab.decode(c.text[2].tolist()) == "a quick brown fox jumps"
    assert c.text_mask.sum(1).tolist() == [15, 7, 23, 3]
    assert (c.text[~c.text_mask] == 0).all()
    assert c.language.tolist() == [1, 2, 0, 1]  # "de" is not a model language
    assert c.emotion.tolist() == [2, 0, 3, 1]
    assert c.emotion_known.tolist() == [True, False, True, True]
    assert c.intensity.tolist() == pytest.approx([0.8, 0.0, 0.0, 0.1])
    assert c.rate.tolist() == [2, 0, 5, 1] and c.loudness.tolist() == [3, 0, 1, 5]


def test_padding_invariance_per_item():
    segs, latents, vocab = make_data()
    plan = ItemPlan(3, (1, 4), 3)
    alone = run([plan], segs, latents, vocab, text_path="aligned")
    padded = run([plan, ItemPlan(2, (0, 20), 2)], segs, latents, vocab, text_path="aligned")
    n, nt = segs[3].n_frames, 3
    a, p = alone.cond, padded.cond
    assert torch.equal(alone.x1[0], padded.x1[0, :n])
    for name in ("frame_mask", "target_mask", "prompt"):
        assert torch.equal(getattr(a, name)[0], getattr(p, name)[0, :n])
        assert not getattr(p, name)[0, n:].any()
    assert torch.equal(a.text[0], p.text[0, :nt]) and not p.text[0, nt:].any()
    assert torch.equal(a.char_unit[0], p.char_unit[0, :nt]) and (p.char_unit[0, nt:] == -1).all()
    assert torch.equal(a.unit_frames[0], p.unit_frames[0, :1])
    assert p.unit_mask[0].tolist() == [True] + [False] * (p.unit_mask.shape[1] - 1)


def test_aligned_units():
    segs, latents, vocab = make_data()
    batch = run([ItemPlan(0, (0, 5), 0)], segs, latents, vocab, text_path="aligned")
    c = batch.cond
    # "hello big world": units hello(0-5) big(6-9) world(10-15); spaces are -1.
    assert c.char_unit[0].tolist() == [0] * 5 + [-1] + [1] * 3 + [-1] + [2] * 5
    assert c.unit_frames[0].tolist() == [[0, 10], [12, 18], [20, 30]]
    assert c.unit_mask[0].all()
    assert batch.num_chars == 13


def test_cross_segment_layout_text_and_units():
    segs, latents, vocab = make_data()
    # Prompt: the words "quick brown" of seg2 (chars 2:13, frames 4:26); target: seg0.
    plan = ItemPlan(0, (0, segs[0].n_frames), 2, (4, 26), (2, 13), cross=True)
    assert needed_indices([plan]) == [0, 2]
    batch = run([plan], segs, latents, vocab, text_path="aligned")
    c = batch.cond
    n_p, n_t = 22, segs[0].n_frames
    assert batch.x1.shape[1] == n_p + n_t
    np.testing.assert_allclose(
        batch.x1[0, :n_p].numpy(),
        (latents[2][4:26].astype(np.float32) - STATS.mean) / STATS.std,
        rtol=1e-6,
    )
    assert c.target_mask[0].tolist() == [False] * n_p + [True] * n_t
    assert torch.equal(c.prompt[0, :n_p], batch.x1[0, :n_p]) and (c.prompt[0, n_p:] == 0).all()
    assert vocab.decode(c.text[0].tolist()) == "quick brown hello big world"
    assert (
        c.char_unit[0].tolist()
        == [0] * 5 + [-1] + [1] * 5 + [-1] + [2] * 5 + [-1] + [3] * 3 + [-1] + [4] * 5
    )
    assert c.unit_frames[0].tolist() == [[0, 10], [12, 22], [22, 32], [34, 40], [42, 52]]
    assert batch.segment_ids == ["seg0"] and batch.prompt_segment_ids == ["seg2"]
    assert c.language.tolist() == [1] and c.emotion.tolist() == [2]  # target's labels


def test_cross_plans_from_the_pairing_collate():
    segs, latents, vocab = make_data()
    pairing = CrossSegment(cross_p=1.0, min_prompt_frames=4, max_prompt_frames=100)
    plans = pairing.plan([0, 1, 2], segs, np.random.default_rng(5))
    assert all(p.cross for p in plans)
    batch = run(plans, segs, latents, vocab, text_path="aligned")
    for i, p in enumerate(plans):
        n = p.prompt_frames + segs[p.target_index].n_frames
        assert batch.cond.frame_mask[i].sum() == n
        assert batch.cond.target_mask[i].sum() == segs[p.target_index].n_frames


def test_cfg_drop_fixed_draws_and_eval_off():
    segs, latents, vocab = make_data()
    plans = [ItemPlan(i, (0, 3), i) for i in range(4)] * 8
    rng = np.random.default_rng(0)
    c = run(
        plans, segs, latents, vocab, cfg=CFGDrop(text_p=0.0, prompt_p=0.0, both_p=0.0), rng=rng
    ).cond
    assert not c.drop_text.any() and not c.drop_prompt.any()
    ref = np.random.default_rng(0)
    ref.random((32, 3))
    assert rng.random() == ref.random()  # three uniforms per item even with p = 0

    c = run(
        plans, segs, latents, vocab, cfg=CFGDrop(text_p=0.0, prompt_p=0.0, both_p=1.0), rng=rng
    ).cond
    assert c.drop_text.all() and c.drop_prompt.all()
    c = run(
        plans, segs, latents, vocab, cfg=CFGDrop(text_p=0.0, prompt_p=1.0, both_p=0.0), rng=rng
    ).cond
    assert not c.drop_text.any() and c.drop_prompt.all()
    c = run(
        plans, segs, latents, vocab, cfg=CFGDrop(text_p=1.0, prompt_p=1.0, both_p=1.0), rng=None
    ).cond
    assert not c.drop_text.any() and not c.drop_prompt.any()


def test_to_device_keeps_values():
    segs, latents, vocab = make_data()
    batch = run([ItemPlan(0, (0, 3), 0)], segs, latents, vocab, text_path="aligned")
    moved = batch.to("cpu")
    assert torch.equal(moved.x1, batch.x1) and torch.equal(
        moved.cond.char_unit, batch.cond.char_unit
    )


def test_batch_is_built_as_stored_and_finished_where_used():
    """float16 latents and no prompt on the CPU; `x1` and `cond` made on first access with
    the bits of the element-wise float32 normalisation; float32 latents stay float32."""
    segs, latents, vocab = make_data()
    plans = [ItemPlan(0, (3, 10), 0), ItemPlan(3, (0, segs[3].n_frames), 3)]
    batch = run(plans, segs, latents, vocab)
    assert batch.latents.dtype == torch.float16 and batch.conditions.prompt is None
    assert batch.latents.shape == (2, segs[0].n_frames, D) and (batch.latents[1, segs[3].n_frames:] == 0).all()
    expected = np.zeros((2, segs[0].n_frames, D), np.float32)
    for i, k in enumerate((0, 3)):
        rows = latents[k].astype(np.float32)
        expected[i, : rows.shape[0]] = (rows - STATS.mean.astype(np.float32)) / STATS.std.astype(np.float32)
    assert torch.equal(batch.x1, torch.from_numpy(expected))  # bit for bit, padding +0.0
    assert batch.x1 is batch.x1 and batch.cond is batch.cond  # made once
    assert batch.cond.prompt.dtype == torch.float32
    assert torch.equal(batch.cond.prompt, batch.x1.masked_fill(batch.cond.target_mask[..., None], 0.0))
    assert batch.to("cpu") is batch  # already there: what it made is kept
    as_f32 = run(plans, segs, {k: v.astype(np.float32) for k, v in latents.items()}, vocab)
    assert as_f32.latents.dtype == torch.float32 and torch.equal(as_f32.x1, batch.x1)
    assert torch.equal(as_f32.cond.prompt, batch.cond.prompt)


def test_errors():
    segs, latents, vocab = make_data()
    with pytest.raises(ConfigError, match="text_path='both'"):
        run([ItemPlan(0, (0, 3), 0)], segs, latents, vocab, text_path="both")
    with pytest.raises(DataError, match="no latents for item 1"):
        run([ItemPlan(1, (0, 3), 1)], segs, {0: latents[0]}, vocab)
    bad = {0: latents[0][:-2]}
    with pytest.raises(DataError, match="segment seg0: latents of shape"):
        run([ItemPlan(0, (0, 3), 0)], segs, bad, vocab)
    no_units = [attrs.evolve(segs[0], units=None)]
    with pytest.raises(DataError, match="seg0 has no unit timings"):
        run([ItemPlan(0, (0, 3), 0)], no_units, latents, vocab, text_path="aligned")
    with pytest.raises(ConfigError, match="CFGDrop.both_p=2"):
        CFGDrop(both_p=2)
