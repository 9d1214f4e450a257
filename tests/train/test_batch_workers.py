"""Batches built by several workers are the batches of one, in the same order, through a
kill and a resume (`flowkit.batching.prefetch`, ``Trainer.batch_workers``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import attrs
import numpy as np
import pytest
import torch
from state_compare import assert_same_tensors, final_state, records
from train_helpers import train, train_stopped_at

from flowkit import config as gin_config
from flowkit import registry
from flowkit.batching.builder import BatchBuilder
from flowkit.batching.collate import Batch, CFGDrop
from flowkit.batching.pairing import CrossSegment, InClip
from flowkit.batching.prefetch import MAX_DEFAULT_WORKERS, StepPrefetcher, default_batch_workers
from flowkit.batching.samplers import BatchStream, FrameBudget
from flowkit.data.dataset import LatentDataset
from flowkit.data.stats import compute_latent_stats
from flowkit.errors import ConfigError
from flowkit.train import run
from flowkit.train.settings import Trainer

#: base.gin's batching (in-clip prompts, unaligned text) and e13's (cross-segment prompts,
#: aligned text), sized for the tiny store of tests/train/conftest.py.
CONFIGS = {
    "base": ("unaligned", InClip(min_target_frac=0.7, max_target_frac=1.0)),
    "e13": ("aligned", CrossSegment(cross_p=0.5, min_prompt_frames=12, max_prompt_frames=48)),
}
#: e13's model and pairing on gin/debug.gin, for whole runs.
E13 = (
    "model.dit.text_path = 'aligned'", "model.dit.dur_cond = 'emotion'",
    "Trainer.pairing = @pairing.cross_segment()", "pairing.cross_segment.cross_p = 0.5",
    "pairing.cross_segment.min_prompt_frames = 12", "pairing.cross_segment.max_prompt_frames = 48",
)


def _tensors(batch: Batch) -> dict[str, torch.Tensor | list[str] | int | None]:
    """Every field of a batch and of its conditions."""
    out: dict[str, torch.Tensor | list[str] | int | None] = {
        "x1": batch.x1, "num_target_frames": batch.num_target_frames, "num_real_frames": batch.num_real_frames,
        "num_chars": batch.num_chars, "segment_ids": batch.segment_ids, "prompt_segment_ids": batch.prompt_segment_ids,
    }
    for field in attrs.fields(type(batch.cond)):
        value = getattr(batch.cond, field.name)
        out[f"cond.{field.name}"] = value if isinstance(value, torch.Tensor | type(None)) else repr(value)
    return out


def assert_same_batches(a: list[Batch], b: list[Batch]) -> None:
    """Byte for byte: every tensor with torch.equal (dtype and shape included), the rest with ==."""
    assert len(a) == len(b)
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        tx, ty = _tensors(x), _tensors(y)
        assert tx.keys() == ty.keys()
        for name, value in tx.items():
            other = ty[name]
            if isinstance(value, torch.Tensor):
                assert isinstance(other, torch.Tensor) and value.dtype == other.dtype, (k, name)
                assert value.shape == other.shape and torch.equal(value, other), (k, name)
            else:
                assert value == other, (k, name)


class _Stream:
    """A training data stream as the loop has one: sampler position + data generator."""

    def __init__(self, store: Path, config: str) -> None:
        text_path, pairing = CONFIGS[config]
        self.dataset = LatentDataset.open([store], "train", require_units=text_path == "aligned")
        stats = compute_latent_stats(self.dataset)
        vocab = registry.build("text", "chars").build_vocab(seg.text for seg in self.dataset.segments)
        sampler = FrameBudget(frame_budget=400, max_items=4)
        self.builder = BatchBuilder(self.dataset, pairing, stats, vocab, ["en"], text_path, CFGDrop(0.1, 0.3, 0.2))
        self.batches = BatchStream(sampler, pairing.budget_lengths(self.dataset.segments), 7)
        self.rng = np.random.default_rng(11)

    def plan(self):
        return [self.builder.plan(self.batches.next()[1], self.rng, train=True) for _ in range(2)]  # 2 micro-batches

    def assemble(self, plans):
        return [self.builder.assemble(p)[0] for p in plans]

    def snapshot(self):
        return {"sampler": self.batches.state_dict(), "data": self.rng.bit_generator.state}

    def restore(self, state) -> None:
        self.batches.load_state_dict(state["sampler"])
        self.rng.bit_generator.state = state["data"]


def _steps(stream: _Stream, workers: int, n: int, *, enabled: bool = True):
    prefetcher = StepPrefetcher(stream.plan, stream.snapshot, enabled=enabled, depth=2, workers=workers,
                                assemble=stream.assemble)
    try:
        return [prefetcher.get() for _ in range(n)]
    finally:
        prefetcher.close()


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_n_workers_build_the_batches_of_one_thread_and_resume_to_them(tiny_store: Path, config: str) -> None:
    # the reference: every step built inline, in this thread, as with prefetching off
    one = _steps(_Stream(tiny_store, config), 1, 12, enabled=False)
    many = _steps(_Stream(tiny_store, config), 4, 12)
    for a, b in zip(one, many, strict=True):
        assert_same_batches(a.value, b.value)
        assert a.state["sampler"] == b.state["sampler"] and a.state["data"] == b.state["data"]
    # resume mid-epoch from step 5's snapshot, with another worker count: steps 6.. again
    resumed = _Stream(tiny_store, config)
    resumed.restore(many[4].state)
    for a, b in zip(one[5:], _steps(resumed, 3, 7), strict=True):
        assert_same_batches(a.value, b.value)
    if config == "e13":  # the stream held cross-segment prompts (another segment's frames)
        assert any(b.prompt_segment_ids != b.segment_ids for step in one for b in step.value)


def test_steps_come_out_in_planning_order_whichever_assembly_finishes_first() -> None:
    planned = iter(range(1000))
    finished: list[int] = []
    lock = threading.Lock()

    def assemble(k: int) -> int:
        time.sleep(0.08 if k % 4 == 0 else 0.005)  # every fourth step is slow: later ones overtake it
        with lock:
            finished.append(k)
        return k

    prefetcher = StepPrefetcher(lambda: next(planned), lambda: None, depth=4, workers=4, assemble=assemble)
    got = [prefetcher.get().value for _ in range(16)]
    prefetcher.close()
    assert got == list(range(16))
    assert finished != sorted(finished)  # the assemblies did finish out of order


def test_an_assembly_error_is_raised_at_its_step_after_the_steps_before() -> None:
    planned = iter(range(1000))

    def assemble(k: int) -> int:
        if k == 3:
            time.sleep(0.05)  # later steps finish first; the error still comes at step 3
            raise ValueError("bad item in step 3")
        return k

    prefetcher = StepPrefetcher(lambda: next(planned), lambda: None, depth=2, workers=3, assemble=assemble)
    assert [prefetcher.get().value for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="step 3"):
        prefetcher.get()
    assert prefetcher.get().value > 3  # a later get plans on from where the stream stands
    prefetcher.close()
    assert not prefetcher.in_flight


def test_at_most_ahead_steps_are_planned_before_one_is_consumed() -> None:
    planned: list[int] = []

    def plan() -> int:
        planned.append(len(planned))
        return planned[-1]

    prefetcher = StepPrefetcher(plan, lambda: None, depth=2, workers=5, assemble=lambda k: k)
    assert prefetcher.ahead == 5
    assert prefetcher.get().value == 0
    deadline = time.monotonic() + 10
    while len(planned) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert len(planned) == 6  # step 0 consumed, steps 1-5 planned, no further
    prefetcher.close()


@pytest.mark.parametrize("extra", [(), E13], ids=["base", "e13"])
def test_a_run_with_workers_trains_the_bits_of_one_thread_through_a_kill_and_resume(
    tiny_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: tuple[str, ...]
) -> None:
    reference = train(tiny_store, tmp_path / "one", "Trainer.batch_workers = 1", *extra)
    # Assemblies that finish out of order: the first of every three is the slowest.
    original = BatchBuilder.assemble
    calls = iter(range(10**6))

    def uneven(self, plan):
        if threading.current_thread().name.startswith("flowkit-batch") and next(calls) % 3 == 0:
            time.sleep(0.03)
        return original(self, plan)

    monkeypatch.setattr(BatchBuilder, "assemble", uneven)
    original_train = run.train

    def train_with(*args, **kwargs):  # train_stopped_at's run, with 3 workers and the extra bindings
        args[1].extend(["Trainer.batch_workers = 3", *extra])
        return original_train(*args, **kwargs)

    monkeypatch.setattr(run, "train", train_with)
    stopped = train_stopped_at(monkeypatch, tiny_store, tmp_path / "many", stop=5)
    monkeypatch.setattr(run, "train", original_train)
    run.resume(stopped.run_dir, device="cpu", bindings=["Trainer.batch_workers = 2"])
    assert_same_tensors(final_state(reference.run_dir), final_state(stopped.run_dir))
    assert records(reference.run_dir) == records(stopped.run_dir)


def test_batch_workers_default_from_the_cpus_and_must_be_positive() -> None:
    cores = len(__import__("os").sched_getaffinity(0))
    assert default_batch_workers() == max(1, min(MAX_DEFAULT_WORKERS, cores - 1))
    gin_config.parse([], ["Trainer.data = []"])
    assert Trainer().build_workers() == default_batch_workers()
    with pytest.raises(ConfigError, match=r"Trainer.batch_workers = 0 must be >= 1"):
        Trainer(batch_workers=0)
    assert Trainer(batch_workers=3).build_workers() == 3
    with pytest.raises(ValueError, match="workers = 0"):
        StepPrefetcher(lambda: 0, lambda: None, workers=0)
