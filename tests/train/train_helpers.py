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
#: The experiment the trainer tests run (with `TINY`).
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


def spanish_store(path: Path) -> Path:
    """A store like the tiny one (8 channels, the same synthetic encoder) in Spanish, whose
    texts hold characters the base never saw (ñ, á)."""
    import numpy as np

    from flowkit.data.store import SegmentRecord, StoreWriter

    rng = np.random.default_rng(1)
    writer = StoreWriter.create(path, encoder_name="synthetic", encoder_params={"dim": 8}, frame_rate=100.0,
                                sample_rate=16000, latent_dim=8, latent_dtype="float32")
    words = ("año", "más", "niño", "sol")
    for k in range(8):
        text = " ".join(words[i] for i in rng.integers(0, len(words), size=3))
        n = 8 * len(text)
        t = np.arange(n)[:, None]
        latents = np.sin(0.05 * t * (1 + np.arange(8)[None, :])) + 0.1 * rng.standard_normal((n, 8))
        units = []
        pos = frame = 0
        for w in text.split():
            units.append((pos, pos + len(w), frame, frame + 8 * len(w)))
            pos, frame = pos + len(w) + 1, frame + 8 * (len(w) + 1)
        writer.add(SegmentRecord(segment_id=f"es_{k}", speaker="spk9", language="es", emotion="",
                                 intensity=float("nan"), rate=1, loudness=1, split="val" if k >= 6 else "train",
                                 text=text, latents=latents.astype(np.float32), units=tuple(units)))
    return writer.commit()
