"""Prefetching the next step's batches changes nothing a checkpoint or a resume can see."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from state_compare import assert_same_tensors, final_state, records
from train_helpers import train, train_stopped_at

from flowkit.batching.builder import BatchBuilder
from flowkit.train import run


def test_prefetch_on_and_off_train_the_same_bits(tiny_store: Path, tmp_path: Path) -> None:
    on = train(tiny_store, tmp_path / "on", steps=6)
    off = train(tiny_store, tmp_path / "off", "Trainer.prefetch = False", steps=6)
    assert_same_tensors(final_state(on.run_dir), final_state(off.run_dir))
    assert records(on.run_dir) == records(off.run_dir)


def test_a_batch_prefetched_at_a_checkpoint_leaves_no_trace(tiny_store: Path, tmp_path: Path, monkeypatch) -> None:
    reference = train(tiny_store, tmp_path / "ref", steps=8)
    # Slow builds: whenever the run saves (steps 4 and 6 here), the next step's build is
    # still running in the prefetch thread, advancing the sampler and the data stream.
    original = BatchBuilder.build
    in_flight_at_save = []

    def slow_build(self, *args, **kwargs):
        if threading.current_thread().name == "flowkit-prefetch":
            time.sleep(0.05)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(BatchBuilder, "build", slow_build)
    from flowkit.train import loop

    original_save = loop.TrainingLoop.save

    def watching_save(self):
        in_flight_at_save.append(self.prefetcher.in_flight)
        original_save(self)

    monkeypatch.setattr(loop.TrainingLoop, "save", watching_save)
    # SIGTERM after step 6 of 8: the stop checkpoint is written with step 7's build in flight.
    stopped = train_stopped_at(monkeypatch, tiny_store, tmp_path / "run", stop=6)
    assert any(in_flight_at_save)
    monkeypatch.undo()
    run.resume(stopped.run_dir, device="cpu")
    assert_same_tensors(final_state(reference.run_dir)["model"], final_state(stopped.run_dir)["model"])
    assert_same_tensors(final_state(reference.run_dir)["rng"], final_state(stopped.run_dir)["rng"])
    assert records(reference.run_dir) == records(stopped.run_dir)
