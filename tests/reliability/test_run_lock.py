"""One run directory, one trainer — with real processes: a second ``flowkit train`` or
``flowkit resume`` on a busy run directory is refused with one line (exit 5); a lock left
by a process killed with SIGKILL is detected and taken over, and the takeover is recorded."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from reliability_helpers import DEBUG_GIN, TINY, assert_one_clear_line, cli, env, train_argv

from flowkit.errors import TrainingError
from flowkit.train import run


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.05)


def test_a_second_train_is_refused_and_a_killed_ones_lock_is_taken_over(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # A long first run: it is still training while the second one starts.
    first = subprocess.Popen(train_argv(store, out, 500, "Trainer.save_every = 1000", "Trainer.eval_every = None"),
                             env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(out / "heartbeat.json", first)
        second = cli(*train_argv(store, out, 2)[3:])
        assert first.poll() is None, "the first run must still be training"
        assert_one_clear_line(second, "in use by pid", str(first.pid), "run.lock")
        assert second.returncode == TrainingError.exit_code
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    assert (out / "run.lock").exists()  # left behind by the killed process
    third = cli(*train_argv(store, out, 2)[3:])
    assert third.returncode == 0, third.stderr
    info = json.loads((out / "run_info.json").read_text())
    assert info["lock_taken_over"]["pid"] == first.pid
    assert not (out / "run.lock").exists()


def test_resume_on_a_busy_run_is_refused_until_the_holder_dies(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run.train([DEBUG_GIN], list(TINY), data=[store], out=out, steps=1, device="cpu")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (out / "run.lock").write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(), "since": 0}))
        busy = cli("resume", out, "--steps", "2", "--device", "cpu")
        assert_one_clear_line(busy, "in use by pid", str(holder.pid))
        assert busy.returncode == TrainingError.exit_code
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    resumed = cli("resume", out, "--steps", "2", "--device", "cpu")
    assert resumed.returncode == 0, resumed.stderr
    info = json.loads((out / "resume_info-00000001.json").read_text())
    assert info["lock_taken_over"]["pid"] == holder.pid


def _zombie() -> subprocess.Popen:
    """A child that has exited and is not reaped yet (its parent, this test, has not waited)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stat = Path(f"/proc/{child.pid}/stat")
    deadline = time.monotonic() + 30
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    return child


@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="zombies are read from Linux's /proc")
def test_a_zombie_holds_no_lock(tmp_path: Path) -> None:
    """A trainer killed with its parent (``kill -9`` of a sweep's process group) stays a
    zombie until someone reaps it; signal 0 still reaches it, but it trains nothing: its
    run is not in progress and a new trainer takes its lock over."""
    from flowkit.processes import pid_alive
    from flowkit.report.rundir import read_run
    from flowkit.train.workspace import RunLock

    child = _zombie()
    try:
        os.kill(child.pid, 0)  # the pid still answers: a signal-0 check alone would take it for a live trainer
        assert not pid_alive(child.pid)
        assert pid_alive(os.getpid()) and not pid_alive(0) and not pid_alive(-1)  # 0 and -1 would reach groups
        lock = tmp_path / "run.lock"
        lock.write_text(json.dumps({"pid": child.pid, "host": socket.gethostname(), "since": 0}))
        (tmp_path / "config.gin").write_text("Trainer.steps = 10\n")
        run_dir = read_run(tmp_path)
        assert run_dir.lock_holder_alive() is False and run_dir.state != "in progress"
        taken = RunLock.acquire(lock)
        assert taken.took_over is not None and taken.took_over["pid"] == child.pid
        taken.release()
    finally:
        child.wait()
    assert not pid_alive(child.pid)  # reaped: gone
