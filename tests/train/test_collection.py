"""The training loop's garbage-collection policy: off inside the loop, at fixed steps, restored."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from state_compare import assert_same_tensors, final_state, records
from train_helpers import train

from flowkit.train import collection, loop
from flowkit.train.collection import FULL_EVERY, GarbageCollection


def test_collection_is_off_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with GarbageCollection(5) as policy:
        assert not gc.isenabled()
        assert [policy.maybe_collect(step) for step in range(12)] == [step in (5, 10) for step in range(12)]
        assert policy.collections == 2 and policy.seconds > 0
    assert gc.isenabled()


def test_collection_off_before_stays_off_and_none_changes_nothing() -> None:
    gc.disable()
    try:
        with GarbageCollection(3):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with GarbageCollection(None) as policy:
        assert gc.isenabled()
        assert not policy.maybe_collect(10)
    assert gc.isenabled()


def test_every_tenth_scheduled_collection_is_a_full_one(monkeypatch) -> None:
    generations: list[int] = []
    monkeypatch.setattr(collection.gc, "collect", lambda generation=2: generations.append(generation) or 0)
    with GarbageCollection(1) as policy:
        for step in range(1, 2 * FULL_EVERY + 1):
            policy.maybe_collect(step)
    # the first entry is the clean start on entering the loop
    assert generations[0] == 2
    scheduled = generations[1:]
    assert len(scheduled) == 2 * FULL_EVERY
    assert [i + 1 for i, g in enumerate(scheduled) if g == 2] == [FULL_EVERY, 2 * FULL_EVERY]


def test_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="every = 0 must be >= 1"):
        GarbageCollection(0)


def test_a_run_trains_with_collection_off_and_the_same_bits_as_automatic(tiny_store: Path, tmp_path: Path,
                                                                        monkeypatch) -> None:
    automatic = train(tiny_store, tmp_path / "auto", "Trainer.gc_every = None", steps=6)
    seen: list[bool] = []
    original = loop.TrainingLoop.train_step

    def watching(self, lr):
        seen.append(gc.isenabled())
        return original(self, lr)

    monkeypatch.setattr(loop.TrainingLoop, "train_step", watching)
    scheduled = train(tiny_store, tmp_path / "every2", "Trainer.gc_every = 2", steps=6)
    assert seen == [False] * 6  # off through the loop ...
    assert gc.isenabled()  # ... and on again after it
    assert_same_tensors(final_state(automatic.run_dir), final_state(scheduled.run_dir))
    assert records(automatic.run_dir) == records(scheduled.run_dir)


def test_what_existed_on_entry_is_frozen_inside_and_unfrozen_after() -> None:
    assert gc.get_freeze_count() == 0
    with GarbageCollection(7):
        assert gc.get_freeze_count() > 0  # the set-up's objects: out of every collection's reach
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_alone_and_reentry_is_refused() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        policy = GarbageCollection(4)
        with policy:
            with pytest.raises(RuntimeError, match="already in force"):
                policy.__enter__()
        # frozen objects are still freed by reference counting (another thread's, pytest's), so a
        # few may go; a policy that unfroze the caller's would leave next to none of them
        assert gc.get_freeze_count() >= 0.99 * frozen and gc.isenabled()
    finally:
        gc.unfreeze()


def test_a_full_collection_freezes_what_survived() -> None:
    with GarbageCollection(1) as policy:
        survivors = [[i] for i in range(1000)]  # allocated inside the loop, long-lived
        before = gc.get_freeze_count()
        for step in range(1, FULL_EVERY + 1):
            policy.maybe_collect(step)
        assert gc.get_freeze_count() >= before + len(survivors)
    assert gc.get_freeze_count() == 0
