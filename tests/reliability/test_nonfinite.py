"""Non-finite values: NaN injected into the latents of chosen training batches (through the
batch builder, where a damaged segment would enter). Policy "stop" ends the run with the
step number and applies nothing; policy "skip" skips that update, counts it, and stops
after ``max_consecutive_skips`` in a row. A NaN never reaches the saved weights, EMA or
optimizer state."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from reliability_helpers import DEBUG_GIN, TINY

from flowkit.batching import builder as batches
from flowkit.checkpoints import files as checkpoint
from flowkit.errors import TrainingError
from flowkit.train import run


def _poison(monkeypatch: pytest.MonkeyPatch, steps: set[int]) -> None:
    """Fill the latents of the training batches of ``steps`` (1-based) with NaN.

    Training plans are made one step after another in one thread (`BatchBuilder.plan`), so
    the k-th training plan is step k's; its batch is poisoned when a build worker assembles it.
    """
    original_plan, original_assemble = batches.BatchBuilder.plan, batches.BatchBuilder.assemble
    calls, poisoned = [0], set()

    def plan(self, indices, rng, *, train):
        made = original_plan(self, indices, rng, train=train)
        if train:
            calls[0] += 1
            if calls[0] in steps:
                poisoned.add(id(made))
        return made

    def assemble(self, made):
        batch, counts = original_assemble(self, made)
        if id(made) in poisoned:  # once: a later plan may reuse a freed plan's id
            poisoned.discard(id(made))
            batch.x1.fill_(math.nan)
        return batch, counts

    monkeypatch.setattr(batches.BatchBuilder, "plan", plan)
    monkeypatch.setattr(batches.BatchBuilder, "assemble", assemble)


def _train(store: Path, out: Path, *extra: str, steps: int = 5):
    # The step-0 memory check builds one batch of its own; without it, build call k is step k.
    extra = ("Trainer.memory_check = False", *extra)
    return run.train([DEBUG_GIN], [*TINY, *extra], data=[store], out=out, steps=steps, device="cpu")


def _all_finite(state) -> bool:
    if isinstance(state, torch.Tensor):
        return not state.is_floating_point() or bool(torch.isfinite(state).all())
    if isinstance(state, dict):
        return all(_all_finite(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return all(_all_finite(v) for v in state)
    return True


def _events(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "event"]


def test_stop_policy_names_the_step(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _poison(monkeypatch, {3})
    out = tmp_path / "run"
    with pytest.raises(TrainingError, match=r"non-finite loss at step 3 ") as info:
        _train(store, out)
    assert "\n" not in str(info.value)
    path, _ = checkpoint.find_latest(out / "checkpoints")
    assert path is not None and path.name == "step-00000002"  # nothing of step 3 was saved
    assert _all_finite(checkpoint.load_checkpoint(path).state)


def test_skip_policy_skips_and_counts(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _poison(monkeypatch, {2, 4})
    out = tmp_path / "run"
    outcome = _train(store, out, "Trainer.nonfinite = 'skip'", "Trainer.max_consecutive_skips = 2")
    assert outcome.status == "completed" and outcome.step == 5
    state = checkpoint.load_checkpoint(checkpoint.find_latest(out / "checkpoints")[0]).state
    assert state["counters"]["skipped"] == 2 and state["counters"]["updates"] == 3
    assert _all_finite(state)
    assert [e["step"] for e in _events(out) if e["event"] == "skipped_nonfinite"] == [2, 4]


def test_skip_policy_stops_after_k_in_a_row(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _poison(monkeypatch, {2, 3, 4, 5})
    out = tmp_path / "run"
    with pytest.raises(TrainingError, match=r"at step 4 .*3 steps in a row non-finite") as info:
        _train(store, out, "Trainer.nonfinite = 'skip'", "Trainer.max_consecutive_skips = 3")
    assert "\n" not in str(info.value)
    path, _ = checkpoint.find_latest(out / "checkpoints")
    assert path is not None and _all_finite(checkpoint.load_checkpoint(path).state)


def test_stop_before_any_checkpoint_does_not_name_one(store: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """No "last checkpoint" when none exists, in the error and in report.md."""
    _poison(monkeypatch, {2})
    out = tmp_path / "run"
    with pytest.raises(TrainingError) as info:
        _train(store, out, "Trainer.save_every = 100")
    message = str(info.value)
    assert "no checkpoint was saved yet: Trainer.save_every = 100" in message and "last checkpoint" not in message
    report = (out / "report.md").read_text()
    assert "continue: flowkit resume" not in report and "before its first checkpoint" in report


def test_skip_counts_add_up_in_the_counters_and_the_report(store: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """steps = optimizer updates + skipped steps, wherever they are shown; the step that stops
    the run after max_consecutive_skips is taken by neither."""
    import re

    _poison(monkeypatch, {2, 3, 4, 5})
    out = tmp_path / "run"
    with pytest.raises(TrainingError):
        _train(store, out, "Trainer.nonfinite = 'skip'", "Trainer.max_consecutive_skips = 3")
    line = next(ln for ln in (out / "report.md").read_text().splitlines() if ln.startswith("- steps:"))
    step, updates, skipped = map(int, re.match(r"- steps: (\d+) / \d+ \((\d+) optimizer updates, (\d+) skipped\)",
                                               line).groups())
    assert step == updates + skipped and skipped == 2  # 3 in a row stop the run: 2 skipped, the third not taken
