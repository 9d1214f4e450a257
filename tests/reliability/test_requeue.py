"""A requeued job restarts with one fixed command.

A preemptible cluster job (SLURM ``--requeue``, a spot instance) re-runs the *same*
command after a kill -9 at any moment. Here that command is ``flowkit train
gin/debug.gin ... --out RUN``, never ``flowkit resume``: it is killed with SIGKILL at
random moments - during start-up (before the run directory exists or before its first
checkpoint), on its first metrics line, inside a checkpoint save, right after a commit,
or at a random time into training - and run again until it completes. The final model,
EMA, optimizer, counters, sampler and random streams, and the train/eval lines of
metrics.jsonl, equal an uninterrupted run's bit for bit.

The kill moments are the ones of tests/reliability/test_kill_anywhere.py plus start-up.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from reliability_helpers import cli, env, train_argv
from state_compare import assert_same_tensors, final_state, records
from test_kill_anywhere import _kill_when, _reference

PACE = Path(__file__).parent / "pace"  # sitecustomize: a pause before every training step


def paced_env() -> dict[str, str]:
    """env() with each training step paced, so that every kill moment comes on any machine."""
    base = env()
    path = os.pathsep.join(p for p in (str(PACE), base.get("PYTHONPATH", "")) if p)
    return {**base, "PYTHONPATH": path, "FLOWKIT_TEST_STEP_PAUSE": "0.4"}

MODES = ("startup", "early", "in_save", "after_commit", "random")
STEPS = 10


def _kill(proc: subprocess.Popen, run: Path, mode: str, rng: random.Random) -> bool:
    if mode != "startup":
        return _kill_when(proc, run, mode, rng)
    deadline = time.monotonic() + rng.uniform(0.0, 4.0)  # imports, parse, data, model build
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return True


def requeue_until_done(command: list[str], run: Path, modes: list[str], rng: random.Random) -> int:
    """Run ``command`` again after each kill (one per mode), then to the end; the kills survived."""
    kills = 0
    for mode in modes:
        proc = subprocess.Popen(command, env=paced_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if not _kill(proc, run, mode, rng):
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err.decode()
            return kills
        kills += 1
    done = subprocess.run(command, env=paced_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return kills


@pytest.mark.slow
def test_the_fixed_command_survives_sigkill_anywhere(store: Path, tmp_path: Path) -> None:
    reference = _reference(store, tmp_path / "ref", STEPS)
    per_seed = {}
    for seed in (101, 102, 103):
        rng = random.Random(seed)
        run = tmp_path / f"run-{seed}"
        command = train_argv(store, run, STEPS)
        modes = ["startup", "early", "in_save"] + [rng.choice(MODES) for _ in range(4)]
        per_seed[seed] = requeue_until_done(command, run, modes, rng)
        assert_same_tensors(final_state(reference), final_state(run))
        assert records(run) == records(reference), seed
        assert not (run / "run.lock").exists()
    print(f"kills per seed: {per_seed}, total {sum(per_seed.values())}")
    (tmp_path.parent / "requeue-kills.json").write_text(json.dumps(per_seed))
    assert sum(per_seed.values()) >= 20, per_seed


def test_train_again_before_the_first_checkpoint_starts_from_step_0(store: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = cli(*train_argv(store, run, 2, "Trainer.save_every = 100")[3:])  # saves only at the end
    assert first.returncode == 0, first.stderr
    for step_dir in (run / "checkpoints").iterdir():  # as if killed before any checkpoint
        shutil.rmtree(step_dir)
    for step_dir in (run / "best").iterdir():
        shutil.rmtree(step_dir)
    again = cli(*train_argv(store, run, 2, "Trainer.save_every = 100")[3:])
    assert again.returncode == 0, again.stderr
    assert "has no valid checkpoint (none was written); starting it from step 0" in again.stdout
    assert [r["step"] for r in records(run) if r["kind"] == "train"] == [1, 2]


def test_train_again_continues_from_the_newest_checkpoint(store: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert cli(*train_argv(store, run, 2)[3:]).returncode == 0
    again = cli(*train_argv(store, run, 3)[3:])  # the same config, a higher step count
    assert again.returncode == 0, again.stderr
    assert "continuing" in again.stdout and "(step 2)" in again.stdout
    assert [r["step"] for r in records(run) if r["kind"] == "train"] == [1, 2, 3]


def test_train_again_with_another_config_names_the_binding(store: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert cli(*train_argv(store, run, 2)[3:]).returncode == 0
    other = cli(*train_argv(store, run, 2, "Trainer.lr = 0.5")[3:])
    assert other.returncode == 4
    assert "Trainer.lr" in other.stderr and "Traceback" not in other.stderr


def test_resume_without_checkpoint_starts_from_step_0(store: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert cli(*train_argv(store, run, 2, "Trainer.save_every = 100")[3:]).returncode == 0
    for sub in ("checkpoints", "best"):
        for step_dir in (run / sub).iterdir():
            shutil.rmtree(step_dir)
    again = cli("resume", str(run), "--device", "cpu")
    assert again.returncode == 0, again.stderr
    assert "starting it from step 0" in again.stdout


def test_damaged_checkpoints_fall_back_to_best(store: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert cli(*train_argv(store, run, 3)[3:]).returncode == 0
    for old in (run / "best").iterdir():
        shutil.rmtree(old)
    best = run / "best" / "step-00000002"  # a best/ checkpoint older than the newest ones
    shutil.copytree(run / "checkpoints" / "step-00000002", best)
    for step_dir in (run / "checkpoints").iterdir():
        (step_dir / "state.pt").write_bytes(b"damaged")
    again = cli("resume", str(run), "--steps", "4", "--device", "cpu")
    assert again.returncode == 0, again.stderr
    assert "every checkpoint in" in again.stderr and best.name in again.stdout + again.stderr
    assert [r["step"] for r in records(run) if r["kind"] == "train"][-1] == 4


def test_a_save_removes_leftovers_of_killed_saves(tmp_path: Path) -> None:
    import torch

    from flowkit.checkpoints import files as checkpoint

    root = tmp_path / "checkpoints"
    leftover = root / ".step-00000003.partial-99999"
    leftover.mkdir(parents=True)
    (leftover / "state.pt").write_bytes(b"half")
    trash = root / ".step-00000002.old-99998"
    trash.mkdir()
    checkpoint.save_checkpoint(root, 4, {"x": torch.zeros(1)}, {})
    assert sorted(p.name for p in root.iterdir()) == ["step-00000004"]
