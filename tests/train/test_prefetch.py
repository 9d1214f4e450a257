"""Prefetching the next step's batches changes nothing a checkpoint or a resume can see."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from state_compare import assert_same_tensors, final_state, records
from train_helpers import train, train_stopped_at

from flowkit.batching.builder import BatchBuilder
from flowkit.batching.prefetch import Prefetched, StepPrefetcher
from flowkit.train import run


def test_prefetch_on_and_off_train_the_same_bits(tiny_store: Path, tmp_path: Path) -> None:
    on = train(tiny_store, tmp_path / "on", steps=6)
    off = train(tiny_store, tmp_path / "off", "Trainer.prefetch = False", steps=6)
    assert_same_tensors(final_state(on.run_dir), final_state(off.run_dir))
    assert records(on.run_dir) == records(off.run_dir)


def test_a_batch_prefetched_at_a_checkpoint_leaves_no_trace(tiny_store: Path, tmp_path: Path, monkeypatch) -> None:
    reference = train(tiny_store, tmp_path / "ref", steps=8)
    # Slow plans: whenever the run saves (steps 4 and 6 here), the next step's plan is
    # still being made in the prefetch thread, advancing the sampler and the data stream.
    original = BatchBuilder.plan
    in_flight_at_save, slowed = [], []

    def slow_plan(self, *args, **kwargs):
        if threading.current_thread().name == "flowkit-prefetch":
            slowed.append(1)
            time.sleep(0.05)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BatchBuilder, "plan", slow_plan)
    from flowkit.train import loop

    original_save = loop.TrainingLoop.save

    def watching_save(self):
        in_flight_at_save.append(self.prefetcher.in_flight)
        original_save(self)

    monkeypatch.setattr(loop.TrainingLoop, "save", watching_save)
    # SIGTERM after step 6 of 8: the stop checkpoint is written with step 7's build in flight.
    stopped = train_stopped_at(monkeypatch, tiny_store, tmp_path / "run", stop=6)
    assert slowed and any(in_flight_at_save)
    monkeypatch.undo()
    run.resume(stopped.run_dir, device="cpu")
    assert_same_tensors(final_state(reference.run_dir)["model"], final_state(stopped.run_dir)["model"])
    assert_same_tensors(final_state(reference.run_dir)["rng"], final_state(stopped.run_dir)["rng"])
    assert records(reference.run_dir) == records(stopped.run_dir)


def _counting_build(limit_event_at: int | None = None):
    built: list[int] = []
    reached = threading.Event()

    def build() -> int:
        built.append(len(built))
        if limit_event_at is not None and len(built) >= limit_event_at:
            reached.set()
        if built[-1] == 5:
            raise ValueError("bad item in step 5")
        return built[-1]

    return build, built, reached


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_prefetcher_runs_depth_steps_ahead_in_order_and_no_further(depth: int) -> None:
    build, built, reached = _counting_build(limit_event_at=2 + depth)
    prefetcher = StepPrefetcher(build, lambda: len(built), depth=depth)
    got = [prefetcher.get(), prefetcher.get()]
    assert [g.value for g in got] == [0, 1]
    assert got[0].state >= 1  # the snapshot is taken right after its own build, in the thread
    assert reached.wait(30)  # the thread goes on building while nothing is consumed ...
    prefetcher.close()
    assert len(built) == 2 + depth  # ... but never more than depth steps ahead of the consumer
    assert not prefetcher.in_flight


def test_prefetcher_raises_a_build_error_at_its_step_after_the_steps_before() -> None:
    build, built, _ = _counting_build()
    prefetcher = StepPrefetcher(build, lambda: None, depth=3)
    assert [prefetcher.get().value for _ in range(5)] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="step 5"):
        prefetcher.get()
    assert prefetcher.get().value == 6  # a later get builds on from where the stream stands
    prefetcher.close()


def test_prefetcher_disabled_builds_inline_and_depth_must_be_positive() -> None:
    build, built, _ = _counting_build()
    prefetcher = StepPrefetcher(build, lambda: len(built), enabled=False)
    assert prefetcher.get() == Prefetched(0, 1) and built == [0]
    with pytest.raises(ValueError, match="depth"):
        StepPrefetcher(build, lambda: None, depth=0)
