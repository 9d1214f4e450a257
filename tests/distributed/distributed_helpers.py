"""Helpers of the torch.distributed tests: launch flowkit under torchrun, read a run back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from flowkit.checkpoints import files as checkpoint

REPO = Path(__file__).resolve().parents[2]
DEBUG_GIN = REPO / "gin" / "debug.gin"
WATCH = Path(__file__).resolve().parent / "watch"
#: gin/debug.gin on the bundled demo store, saved at every step so step 1 can be checked;
#: a constant lr so that a 2-step run resumed to 4 steps follows the 4-step run's schedule.
BINDINGS = (
    "Trainer.loggers = []",
    "Trainer.lr_schedule = @lr_schedule.constant()",
    "Trainer.eval_every = 2",
    "Trainer.save_every = 1",
    "Trainer.keep_last = 4",
    "Trainer.log_every = 1",
    "Trainer.dist_timeout_s = 120",
)
#: Fields that measure wall-clock time: the only ones allowed to differ after a resume.


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binding_args(*extra: str) -> list[str]:
    return [arg for b in (*BINDINGS, *extra) for arg in ("-b", b)]


def launch(args: list[str], *, watch: Path | None = None, timeout: float = 240,
           env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``args`` (a python -m ... command line) with the audit hook watching ``watch``."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(env_extra or {})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(WATCH), env.get("PYTHONPATH", "")) if p)
    if watch is not None:
        env["FLOWKIT_TEST_WATCH_DIR"] = str(watch)
        env["FLOWKIT_TEST_WRITES_LOG"] = str(watch.parent / f"{watch.name}.writes")
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def torchrun_train(out: Path, steps: int, *extra: str, nproc: int = 2,
                   env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    args = ["-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port", str(free_port()),
            "-m", "flowkit", "train", str(DEBUG_GIN), "--out", str(out), "--device", "cpu",
            *binding_args(f"Trainer.steps = {steps}", *extra)]
    return launch(args, watch=out, env_extra=env_extra)


def writes_of(out: Path, rank: int) -> list[str]:
    log = out.parent / f"{out.name}.writes.rank{rank}"
    return log.read_text().splitlines() if log.is_file() else []


def check(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"




def state_at(run_dir: Path, step: int) -> dict[str, Any]:
    return checkpoint.load_checkpoint(run_dir / "checkpoints" / checkpoint.checkpoint_name(step)).state

