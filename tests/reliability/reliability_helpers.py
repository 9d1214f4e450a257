"""Helpers of the reliability tests: a tiny latent store, the CLI in a subprocess, and
comparisons of finished runs.

The store is written with the data engineer's `StoreWriter` (the same code `flowkit
prepare` commits with): 2 speakers x 8 segments (6 train, 2 val each), 8 latent channels,
40-100 frames, word timings. Small enough that a debug run of a few steps takes seconds.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DEBUG_GIN = REPO / "gin" / "debug.gin"
WORDS = ("la", "mora", "tie", "sun", "kell", "vo")

#: Bindings that make gin/debug.gin fit the tiny store and checkpoint every step.
TINY = (
    "batch_sampler.frame_budget.frame_budget = 400",
    "batch_sampler.frame_budget.max_items = 4",
    "Trainer.loggers = []",
    "Trainer.eval_every = 3",
    "Trainer.eval_batches = 1",
    "Trainer.save_every = 1",
    "Trainer.keep_last = 2",
    "Trainer.log_every = 1",
)
#: Wall-clock fields of a train record: the only ones a resumed run may change.


def segment(k: int, speaker: int, rng: np.random.Generator, *, latent_dim: int = 8, split: str = "train",
            latents: np.ndarray | None = None, text: str | None = None) -> Any:
    """A `SegmentRecord` whose latents follow its text (a learnable pattern plus noise)."""
    from flowkit.data.store import SegmentRecord

    words = [WORDS[i] for i in rng.integers(0, len(WORDS), size=int(rng.integers(2, 4)))]
    timed = text is None and latents is None  # unit timings only where they fit text and frames
    text = " ".join(words) if text is None else text
    per_char = int(rng.integers(4, 7))
    units, pos, frame = [], 0, 0
    for w in words:
        units.append((pos, pos + len(w), frame, frame + len(w) * per_char))
        pos += len(w) + 1
        frame += len(w) * per_char + 2
    if latents is None:
        t = np.arange(frame)[:, None]
        latents = np.sin(0.05 * t * (1 + np.arange(latent_dim))[None, :] + speaker)
        latents = (latents + 0.1 * rng.standard_normal(latents.shape)).astype(np.float32)
    return SegmentRecord(
        segment_id=f"spk{speaker}_{k:02d}", speaker=f"spk{speaker}", language="en", emotion="neutral",
        intensity=math.nan, rate=1 + k % 5, loudness=1 + speaker, split=split, text=text,
        latents=latents, units=tuple(units) if timed else None,
    )


def write_store(path: Path, *, seed: int = 0, extra: Sequence[Any] = ()) -> Path:
    """Commit a tiny store at ``path`` (plus ``extra`` SegmentRecords) and return it."""
    from flowkit.data.store import StoreWriter

    rng = np.random.default_rng(seed)
    writer = StoreWriter.create(path, encoder_name="synthetic", encoder_params={"dim": 8}, frame_rate=100.0,
                                sample_rate=16000, latent_dim=8, latent_dtype="float32")
    for s in range(2):
        for k in range(8):
            writer.add(segment(k, s, rng, split="val" if k >= 6 else "train"))
    for record in extra:
        writer.add(record)
    return writer.commit()


def env(**extra: str) -> dict[str, str]:
    """The subprocess environment: one thread (CPU kernels then sum in one order), no colour."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NO_COLOR": "1",
            "COLUMNS": "400", **extra}


def flowkit_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "flowkit", *map(str, args)]


def train_argv(store: Path, out: Path, steps: int, *extra: str) -> list[str]:
    bindings = [x for b in (*TINY, *extra) for x in ("-b", b)]
    return flowkit_argv("train", DEBUG_GIN, *bindings, "--data", store, "--out", out, "--steps", str(steps),
                        "--device", "cpu")


def cli(*args: str, cwd: Path | None = None, timeout: float = 300, **extra_env: str) -> subprocess.CompletedProcess:
    """Run ``python -m flowkit ARGS`` to the end and capture its output."""
    return subprocess.run(flowkit_argv(*args), env=env(**extra_env), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def assert_one_clear_line(result: subprocess.CompletedProcess, *fragments: str) -> str:
    """A failed CLI call printed exactly one ``error:`` line, no traceback, and named ``fragments``."""
    assert result.returncode not in (0, None), result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]


def invoke_in_process(argv: Sequence[Any], capfd: Any) -> tuple[int, str]:
    """Run ``flowkit ARGV`` in-process (typer's CliRunner): (exit code, everything it printed).
    An exception other than the CLI's own exit fails the test (a traceback is a bug)."""
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    capfd.readouterr()
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    captured = capfd.readouterr()
    return result.exit_code, captured.out + captured.err + result.output


def one_error_in_process(argv: Sequence[Any], capfd: Any, code: int, *fragments: str) -> str:
    """The command fails with ``code`` and exactly one ``error:`` line holding ``fragments``
    (other lines, such as warnings or a memory estimate, may come before it)."""
    exit_code, out = invoke_in_process(argv, capfd)
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert exit_code == code, (exit_code, out)
    assert len(errors) == 1 and "Traceback" not in out, out
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]
