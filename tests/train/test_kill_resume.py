"""Stop the CLI in a subprocess — by SIGTERM, and by kill -9 after a checkpoint — resume it
in a new process, and compare with an uninterrupted run: the same model, EMA and optimizer
tensors and the same metrics records (timing fields aside)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from state_compare import assert_same_tensors, final_state, records
from train_helpers import DEBUG_GIN, TINY

pytestmark = pytest.mark.slow

STEPS = 16


def _argv(store: Path, out: Path) -> list[str]:
    bindings = [x for b in TINY for x in ("-b", b)]
    return [sys.executable, "-m", "flowkit", "train", str(DEBUG_GIN), *bindings, "--data", str(store),
            "--out", str(out), "--steps", str(STEPS), "--device", "cpu"]


def _env() -> dict[str, str]:
    # The same thread count in every process: CPU kernels may sum in another order otherwise.
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _wait_for(predicate, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the run ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "timed out waiting for the run"
        time.sleep(0.02)


def _heartbeat_step(out: Path) -> int:
    try:
        return json.loads((out / "heartbeat.json").read_text())["step"]
    except (OSError, ValueError):
        return -1


@pytest.fixture(scope="module")
def uninterrupted(tiny_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "run"
    subprocess.run(_argv(tiny_store, out), check=True, env=_env(), capture_output=True)
    return out


def _resume(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flowkit", "resume", str(out), "--device", "cpu"],
                          env=_env(), capture_output=True, text=True)


def test_sigterm_then_resume_is_bit_identical(uninterrupted: Path, tiny_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(_argv(tiny_store, out), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(lambda: _heartbeat_step(out) >= STEPS // 2 - 2, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err.decode()
    stopped_at = _heartbeat_step(out)
    assert stopped_at < STEPS
    result = _resume(out)
    assert result.returncode == 0, result.stderr
    assert_same_tensors(final_state(uninterrupted), final_state(out))
    assert records(uninterrupted) == records(out)


def test_kill9_after_a_checkpoint_then_resume_is_bit_identical(uninterrupted: Path, tiny_store: Path,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.Popen(_argv(tiny_store, out), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(lambda: (out / "checkpoints" / "step-00000008" / "COMPLETE").exists(), proc)
    proc.kill()
    proc.communicate(timeout=60)
    # The dead process's lock is taken over; later steps in metrics.jsonl are replayed.
    assert (out / "run.lock").exists()
    result = _resume(out)
    assert result.returncode == 0, result.stderr
    assert_same_tensors(final_state(uninterrupted), final_state(out))
    assert records(uninterrupted) == records(out)
