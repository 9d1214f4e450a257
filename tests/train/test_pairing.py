"""Prompt pairing: in-clip spans, cross-segment prompts (E12), fixed draw counts, fallbacks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowkit.batching.pairing import CrossSegment, InClip, ItemPlan, PairingCounts, needed_indices
from flowkit.data.dataset import SegmentInfo
from flowkit.errors import ConfigError
from flowkit.registry import get


def segment(i, n, *, speaker="s1", store=0, text=None, units=None):
    return SegmentInfo(
        store=store,
        row=i,
        segment_id=f"seg{i}",
        speaker=speaker,
        language="en",
        emotion="",
        intensity=math.nan,
        rate=0,
        loudness=0,
        split="train",
        text=text if text is not None else f"text {i}",
        n_frames=n,
        units=units,
        units_estimated=False,
    )


def word_units(text: str, frames_per_char: int = 4) -> tuple[tuple[int, int, int, int], ...]:
    """One unit per space-separated word, ``frames_per_char`` frames per character."""
    units, pos = [], 0
    for word in text.split(" "):
        units.append(
            (pos, pos + len(word), pos * frames_per_char, (pos + len(word)) * frames_per_char)
        )
        pos += len(word) + 1
    return tuple(units)


def corpus():
    segs = [segment(i, 40 + 13 * i, speaker=f"s{i % 3}", store=i % 2) for i in range(30)]
    segs.append(segment(30, 90, speaker=""))  # no speaker label
    segs.append(segment(31, 90, speaker="lonely", store=5))  # no other segment
    return segs


def test_in_clip_spans_within_fraction_range():
    pairing = InClip(min_target_frac=0.3, max_target_frac=0.6)
    segs = corpus()
    plans = pairing.plan(list(range(len(segs))), segs, np.random.default_rng(0))
    for p, s in zip(plans, segs, strict=True):
        start, end = p.target_span
        assert 0 <= start < end <= s.n_frames
        assert round(0.3 * s.n_frames) <= end - start <= round(0.6 * s.n_frames)
        assert p.prompt_index == p.target_index and p.prompt_span is None and not p.cross


def test_in_clip_full_fraction_leaves_no_prompt():
    segs = corpus()
    plans = InClip(min_target_frac=1.0, max_target_frac=1.0).plan(
        [0, 5], segs, np.random.default_rng(1)
    )
    assert [p.target_span for p in plans] == [(0, segs[0].n_frames), (0, segs[5].n_frames)]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), batch=st.lists(st.integers(0, 31), min_size=1, max_size=12))
def test_cross_p_zero_is_bit_identical_to_in_clip(seed, batch):
    segs = corpus()
    rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed)
    a = InClip().plan(batch, segs, rng_a)
    b = CrossSegment(cross_p=0.0).plan(batch, segs, rng_b)
    assert a == b
    # Same number of draws: both generators are in the same state afterwards.
    assert rng_a.random() == rng_b.random()
    assert CrossSegment(cross_p=0.0).draws_per_item == InClip().draws_per_item == 2


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    batch=st.lists(st.integers(0, 31), min_size=1, max_size=12),
    cross_p=st.floats(0.01, 1.0),
)
def test_draws_per_item_are_fixed(seed, batch, cross_p):
    segs = corpus()
    pairing = CrossSegment(cross_p=cross_p, min_prompt_frames=8, max_prompt_frames=120)
    rng = np.random.default_rng(seed)
    pairing.plan(batch, segs, rng)
    reference = np.random.default_rng(seed)
    reference.random((len(batch), pairing.draws_per_item))
    assert rng.random() == reference.random()


def test_cross_prompts_come_from_the_same_speaker_and_store():
    segs = corpus()
    pairing = CrossSegment(cross_p=1.0, min_prompt_frames=8, max_prompt_frames=1000)
    plans = pairing.plan(list(range(30)), segs, np.random.default_rng(3))
    assert all(p.cross for p in plans)
    for p in plans:
        t, q = segs[p.target_index], segs[p.prompt_index]
        assert p.prompt_index != p.target_index
        assert (t.store, t.speaker) == (q.store, q.speaker)
        assert p.target_span == (0, t.n_frames)
        assert p.prompt_span == (0, q.n_frames) and p.prompt_chars is None
    assert needed_indices(plans) == sorted(
        {i for p in plans for i in (p.target_index, p.prompt_index)}
    )


def test_fallbacks_counted_by_reason():
    segs = corpus()
    segs.append(segment(32, 5, speaker="tiny"))
    segs.append(segment(33, 300, speaker="tiny"))  # partner of 32 and vice versa
    segs.append(segment(34, 60, speaker="long"))
    segs.append(segment(35, 500, speaker="long"))  # too long, no units
    pairing = CrossSegment(cross_p=1.0, min_prompt_frames=10, max_prompt_frames=200)
    plans = pairing.plan([30, 31, 32, 33, 34, 35], segs, np.random.default_rng(0))
    reasons = [p.fallback for p in plans]
    assert reasons == [
        "no_speaker",
        "no_other_segment",
        "prompt_too_long",
        "prompt_too_short",
        "prompt_too_long",
        None,
    ]
    for p in plans[:5]:
        assert not p.cross and p.prompt_index == p.target_index and p.prompt_span is None
    counts = PairingCounts.of(plans)
    assert counts.to_dict() == {
        "items": 6,
        "given": 1,
        "fallbacks": {
            "no_other_segment": 1,
            "no_speaker": 1,
            "prompt_too_long": 2,
            "prompt_too_short": 1,
        },
    }
    total = PairingCounts()
    total.add(counts)
    total.add(counts)
    assert total.given == 2 and total.fallbacks["prompt_too_long"] == 4
    assert PairingCounts.from_dict(total.to_dict()) == total
    assert total.fallback_frac == pytest.approx(5 / 6)


def test_long_partner_with_units_gives_a_whole_unit_window():
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    long_seg = segment(0, len(text) * 4, speaker="w", text=text, units=word_units(text))
    short = segment(1, 50, speaker="w")
    segs = [long_seg, short]
    pairing = CrossSegment(cross_p=1.0, min_prompt_frames=16, max_prompt_frames=80)
    for seed in range(20):
        (p,) = pairing.plan([1], segs, np.random.default_rng(seed))
        if p.fallback is not None:
            assert p.fallback == "prompt_too_short"
            continue
        f0, f1 = p.prompt_span
        c0, c1 = p.prompt_chars
        assert 16 <= f1 - f0 <= 80
        assert (f0, f1) == (c0 * 4, c1 * 4)
        assert text[c0:c1].split(" ")[0] in text.split(" ")


def test_budget_lengths_reserve_prompt_frames_for_pairable_items():
    segs = corpus()
    lengths = np.array([s.n_frames for s in segs])
    np.testing.assert_array_equal(InClip().budget_lengths(segs), lengths)
    np.testing.assert_array_equal(CrossSegment(cross_p=0.0).budget_lengths(segs), lengths)
    reserved = CrossSegment(cross_p=0.5, max_prompt_frames=100).budget_lengths(segs)
    np.testing.assert_array_equal(reserved[:30], lengths[:30] + 100)
    np.testing.assert_array_equal(reserved[30:], lengths[30:])
    assert reserved.dtype == np.int64


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="cross_p=1.5"):
        CrossSegment(cross_p=1.5)
    with pytest.raises(ConfigError, match="min_target_frac=0.8, max_target_frac=0.5"):
        InClip(min_target_frac=0.8, max_target_frac=0.5)
    with pytest.raises(ConfigError, match="min_prompt_frames"):
        CrossSegment(min_prompt_frames=300, max_prompt_frames=200)


def test_item_plan_prompt_frames():
    assert ItemPlan(0, (0, 5), 1, (10, 30), cross=True).prompt_frames == 20
    assert ItemPlan(0, (0, 5), 0).prompt_frames == 0


def test_registered():
    assert get("pairing", "in_clip").obj is InClip
    assert get("pairing", "cross_segment").obj is CrossSegment
