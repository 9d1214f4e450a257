"""Kill a real training run with SIGKILL at random moments, resume it, repeat until it
completes: the final model, EMA, optimizer, counters, sampler and random-stream state
equal an uninterrupted run's bit for bit (torch.equal), and so do the train/eval records
of metrics.jsonl (wall-clock fields aside).

The run checkpoints every step, so kills land inside a step, inside evaluation, inside a
checkpoint save and right after a commit (while old checkpoints are pruned). Save windows
are hit without a hook in the trainer by watching the checkpoint directory for the
hidden ``.step-*.partial-*`` directory a save writes into, and killing while it exists.
After every kill the run directory must hold no invalid committed checkpoint.

A kill before the first checkpoint leaves nothing to resume: the loop starts the run
again with ``flowkit train`` into the same directory (that must work, and must not leave
the dead attempt's records in metrics.jsonl).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from reliability_helpers import env, flowkit_argv, train_argv
from state_compare import assert_same_tensors, final_state, records

MODES = ("early", "in_save", "after_commit", "random")


def _partial_save(run: Path) -> bool:
    for sub in ("checkpoints", "best"):
        try:
            if any(".partial-" in name for name in os.listdir(run / sub)):
                return True
        except FileNotFoundError:
            pass
    return False


def _committed(run: Path) -> set[str]:
    try:
        return {n for n in os.listdir(run / "checkpoints") if n.startswith("step-")}
    except FileNotFoundError:
        return set()


def _kill_when(proc: subprocess.Popen, run: Path, mode: str, rng: random.Random, timeout: float = 120.0) -> bool:
    """SIGKILL ``proc`` at a moment chosen by ``mode``; False if it finished first."""
    deadline = time.monotonic() + timeout
    metrics = run / "metrics.jsonl"
    start_size = metrics.stat().st_size if metrics.exists() else 0
    seen = _committed(run)
    # Let the process get past its imports and into training before a "random" delay.
    delay = rng.uniform(0.0, 2.5)
    armed_at = None
    while proc.poll() is None and time.monotonic() < deadline:
        grew = metrics.exists() and metrics.stat().st_size > start_size
        if mode == "early" and grew:
            break
        if mode == "in_save" and _partial_save(run):
            time.sleep(rng.uniform(0.0, 0.01))
            break
        if mode == "after_commit" and _committed(run) - seen:
            break
        if mode == "random" and grew:
            armed_at = armed_at or time.monotonic()
            if time.monotonic() - armed_at >= delay:
                break
        time.sleep(0.001)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return True


def _start(run: Path, store: Path, steps: int) -> subprocess.Popen:
    from flowkit.checkpoints import files as checkpoint

    valid, skipped = checkpoint.find_latest(run / "checkpoints")
    assert not skipped, f"a kill left an invalid committed checkpoint: {skipped}"
    argv = flowkit_argv("resume", run, "--device", "cpu") if valid else train_argv(store, run, steps)
    return subprocess.Popen(argv, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill_until_done(store: Path, run: Path, steps: int, modes: list[str], rng: random.Random,
                    budget_s: float = 600.0) -> int:
    """Kill the run once per entry of ``modes`` (while time lasts), then let it finish.
    Returns the number of kills it survived."""
    kills = 0
    started = time.monotonic()
    for mode in modes:
        if time.monotonic() - started > budget_s:
            break
        proc = _start(run, store, steps)
        if _kill_when(proc, run, mode, rng):
            kills += 1
        else:
            err = proc.stderr.read().decode() if proc.stderr else ""
            assert proc.returncode == 0, err
            return kills  # it completed before this kill
    proc = _start(run, store, steps)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    return kills


def _reference(store: Path, out: Path, steps: int) -> Path:
    subprocess.run(train_argv(store, out, steps), env=env(), check=True, capture_output=True, timeout=600)
    return out


def _assert_same_run(reference: Path, run: Path) -> None:
    assert_same_tensors(final_state(reference), final_state(run))
    ref_records, got = records(reference), records(run)
    assert [(r["kind"], r["step"]) for r in got] == [(r["kind"], r["step"]) for r in ref_records]
    assert got == ref_records
    assert not (run / "run.lock").exists()


def test_three_kills_then_resume_equals_an_uninterrupted_run(store: Path, tmp_path: Path) -> None:
    steps = 4
    reference = _reference(store, tmp_path / "ref", steps)
    run = tmp_path / "run"
    kills = kill_until_done(store, run, steps, ["early", "in_save", "after_commit"], random.Random(0))
    assert kills == 3
    _assert_same_run(reference, run)


@pytest.mark.slow
def test_kill_anywhere_loop(store: Path, tmp_path: Path) -> None:
    """Random kills (about a dozen, bounded to a few minutes) over a 12-step run."""
    steps = 12
    reference = _reference(store, tmp_path / "ref", steps)
    run = tmp_path / "run"
    rng = random.Random(int(os.environ.get("FLOWKIT_KILL_SEED", "1234")))
    modes = ["early"] + [rng.choice(MODES[1:]) for _ in range(15)]
    kills = kill_until_done(store, run, steps, modes, rng, budget_s=240.0)
    print(f"survived {kills} kills")
    assert kills >= 3
    _assert_same_run(reference, run)
