"""frame_budget batch sampler: properties over random length sets (hypothesis) and errors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowkit.batching.samplers import BatchStream, BudgetError, FrameBudget, SamplerPosition
from flowkit.errors import DataError, ResumeError
from flowkit.registry import get

lengths_st = st.lists(st.integers(1, 400), min_size=1, max_size=120).map(
    lambda xs: np.asarray(xs, dtype=np.int64)
)
sampler_st = st.builds(
    FrameBudget,
    frame_budget=st.integers(400, 2000),
    max_items=st.integers(1, 16),
    pool_size=st.integers(1, 8),
    cost=st.sampled_from(["linear", "quadratic"]),
    quadratic_ref_frames=st.integers(100, 600),
)
FAST = settings(max_examples=40, deadline=None)


def _quad_ok(sampler: FrameBudget, lengths: np.ndarray) -> bool:
    return not (sampler.item_costs(lengths) > sampler.frame_budget).any()  # no item alone over the budget


@FAST
@given(sampler=sampler_st, lengths=lengths_st, seed=st.integers(0, 2**31), epoch=st.integers(0, 50))
def test_each_item_exactly_once_and_budget_respected(sampler, lengths, seed, epoch):
    if not _quad_ok(sampler, lengths):
        with pytest.raises(BudgetError):
            sampler.epoch_batches(lengths, seed, epoch)
        return
    plan = sampler.epoch_batches(lengths, seed, epoch)
    flat = [i for b in plan.batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    costs = sampler.item_costs(lengths)
    for b in plan.batches:
        assert 1 <= len(b) <= sampler.max_items
        assert costs[b].sum() <= sampler.frame_budget
    assert plan.padded == 0 and plan.rejected == []


@FAST
@given(sampler=sampler_st, lengths=lengths_st, seed=st.integers(0, 2**31), epoch=st.integers(0, 50))
def test_deterministic_per_seed_and_epoch(sampler, lengths, seed, epoch):
    if not _quad_ok(sampler, lengths):
        return
    a = sampler.epoch_batches(lengths, seed, epoch).batches
    assert a == sampler.epoch_batches(lengths, seed, epoch).batches
    # Global NumPy state plays no part.
    np.random.seed(1)
    assert a == sampler.epoch_batches(lengths, seed, epoch).batches


def test_other_epoch_seed_or_stream_differs():
    lengths = np.random.default_rng(0).integers(20, 300, size=200).astype(np.int64)
    s = FrameBudget(frame_budget=1500, max_items=8, pool_size=4)
    base = s.epoch_batches(lengths, 7, 0).batches
    assert s.epoch_batches(lengths, 7, 1).batches != base
    assert s.epoch_batches(lengths, 8, 0).batches != base
    assert s.epoch_batches(lengths, 7, 0, stream="val").batches != base


@FAST
@given(
    sampler=sampler_st,
    lengths=lengths_st,
    seed=st.integers(0, 2**31),
    world_size=st.integers(2, 5),
)
def test_world_size_equal_counts_and_full_cover(sampler, lengths, seed, world_size):
    if not _quad_ok(sampler, lengths):
        return
    plans = [
        sampler.epoch_batches(lengths, seed, 3, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    counts = {len(p.batches) for p in plans}
    assert len(counts) == 1
    padded = plans[0].padded
    assert padded == (-plans[0].num_global_batches) % world_size
    seen = Counter(i for p in plans for b in p.batches for i in b)
    assert set(seen) == set(range(len(lengths)))
    # Only the repeated (padding) batches contribute duplicates.
    single = sampler.epoch_batches(lengths, seed, 3).batches
    repeated = sum(len(single[k % len(single)]) for k in range(padded))
    assert sum(seen.values()) == len(lengths) + repeated


@FAST
@given(
    lengths=lengths_st,
    seed=st.integers(0, 2**31),
    consumed=st.integers(0, 60),
    world_size=st.integers(1, 3),
)
def test_position_resume_reproduces_the_rest(lengths, seed, consumed, world_size):
    sampler = FrameBudget(frame_budget=800, max_items=6, pool_size=2)
    rank = world_size - 1
    first = BatchStream(sampler, lengths, seed, rank, world_size)
    for _ in range(consumed):
        first.next()
    state = first.state_dict()
    expected = [first.next() for _ in range(15)]

    second = BatchStream(sampler, lengths, seed, rank, world_size)
    second.load_state_dict(state)
    assert [second.next() for _ in range(15)] == expected


def test_stream_crosses_epochs_and_positions_are_normalised():
    lengths = np.array([100, 200, 300, 400], dtype=np.int64)
    sampler = FrameBudget(frame_budget=500, max_items=2, pool_size=1)
    stream = BatchStream(sampler, lengths, seed=1)
    n0 = len(stream.plan(0).batches)
    got = [stream.next() for _ in range(n0 + 1)]
    assert [p for p, _ in got[:n0]] == [SamplerPosition(0, k) for k in range(n0)]
    assert got[n0][0] == SamplerPosition(1, 0)
    assert got[n0][1] == stream.plan(1).batches[0]
    expected = SamplerPosition(1, 1) if len(stream.plan(1).batches) > 1 else SamplerPosition(2, 0)
    assert stream.position == expected


def test_oversize_error_names_item_and_fix():
    s = FrameBudget(frame_budget=500)
    lengths = np.array([10, 20, 600, 30], dtype=np.int64)
    with pytest.raises(BudgetError, match=r"item 2 has 600 frames.*on_oversize='reject'"):
        s.epoch_batches(lengths, 0, 0)
    assert issubclass(BudgetError, DataError)


def test_oversize_reject_records_and_skips():
    s = FrameBudget(frame_budget=500, on_oversize="reject")
    lengths = np.array([10, 900, 20, 600, 30], dtype=np.int64)
    plan = s.epoch_batches(lengths, 0, 0)
    assert plan.rejected == [1, 3]
    assert sorted(i for b in plan.batches for i in b) == [0, 2, 4]


def test_quadratic_cost_penalises_long_items_only():
    s = FrameBudget(cost="quadratic", quadratic_ref_frames=100)
    np.testing.assert_allclose(s.item_costs(np.array([50, 100, 200])), [50, 100, 400])


def test_load_state_past_epoch_end_is_resume_error():
    lengths = np.array([100, 200], dtype=np.int64)
    stream = BatchStream(FrameBudget(frame_budget=1000), lengths, seed=0)
    with pytest.raises(ResumeError, match="past the epoch"):
        stream.load_state_dict({"epoch": 0, "batch": 5, "stream": "train"})


def test_empty_epoch_is_data_error():
    stream = BatchStream(FrameBudget(frame_budget=10, on_oversize="reject"), np.array([50]), 0)
    with pytest.raises(DataError, match="no batch in epoch 0"):
        stream.next()


def test_registered_as_gin_component():
    assert get("batch_sampler", "frame_budget").obj is FrameBudget


def _fill_item_by_item(sampler, pool, lengths, costs):
    """The greedy fill written as the plain loop over items (the reference of `_fill`)."""
    pool = pool[np.argsort(lengths[pool], kind="stable")]
    out, current, total = [], [], 0.0
    for i in pool.tolist():
        c = float(costs[i])
        if current and (len(current) >= sampler.max_items or total + c > sampler.frame_budget):
            out.append(current)
            current, total = [], 0.0
        current.append(i)
        total += c
    if current:
        out.append(current)
    return out


def test_batch_at_a_time_fill_equals_the_item_loop():
    from flowkit.batching.samplers import FrameBudget

    rng = np.random.default_rng(0)
    for trial in range(60):
        sampler = FrameBudget(frame_budget=int(rng.integers(50, 3000)), max_items=int(rng.integers(1, 40)),
                              cost=("linear", "quadratic")[trial % 2], quadratic_ref_frames=int(rng.integers(10, 400)),
                              on_oversize="reject")
        lengths = rng.integers(1, 300, size=int(rng.integers(1, 500))).astype(np.int64)
        costs = sampler.item_costs(lengths)
        pool = rng.permutation(np.flatnonzero(costs <= sampler.frame_budget))
        assert sampler._fill(pool, lengths, costs) == _fill_item_by_item(sampler, pool, lengths, costs), trial
