"""Helpers of the trainer tests: small in-process runs and comparisons of their results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowkit.train import run

#: Bindings that make gin/debug.gin fit the tiny synthetic store (tests/train/conftest.py).
TINY = (
    "batch_sampler.frame_budget.frame_budget = 400",
    "batch_sampler.frame_budget.max_items = 4",
    "Trainer.loggers = []",
    "Trainer.eval_every = 4",
    "Trainer.save_every = 4",
    "Trainer.log_every = 1",
)
#: Fields that measure wall-clock time: the only ones allowed to differ after a resume.
DEBUG_GIN = Path(__file__).resolve().parents[2] / "gin" / "debug.gin"


def train(store: Path, out: Path, *extra: str, steps: int = 8, config: Path = DEBUG_GIN) -> run.RunOutcome:
    return run.train([config], [*TINY, *extra], data=[store], out=out, steps=steps, device="cpu")








class SignalAt:
    """A logger that sends this process SIGTERM when step ``step`` is logged (tests only)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def open(self, run_dir: Path, *, resumed: bool, total_steps: int, start_step: int) -> None:
        pass

    def log(self, record: dict[str, Any]) -> None:
        import os
        import signal

        if record.get("kind") == "train" and record.get("step") == self.step:
            os.kill(os.getpid(), signal.SIGTERM)

    def close(self) -> None:
        pass


def train_stopped_at(monkeypatch: Any, store: Path, out: Path, stop: int, steps: int = 8) -> run.RunOutcome:
    """An 8-step run stopped by SIGTERM after step ``stop`` (a checkpoint is written)."""
    original = run._loggers
    with monkeypatch.context() as m:
        m.setattr(run, "_loggers", lambda settings: [*original(settings), SignalAt(stop)])
        outcome = train(store, out, steps=steps)
    assert outcome.status == "interrupted" and outcome.step == stop
    return outcome
