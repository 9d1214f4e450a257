"""A full disk: a write that fails with ENOSPC (simulated in-process at the Nth call of a
writer) leaves the previous checkpoint and the metrics lines intact and stops the run with
one TrainingError line that says what to do; the run then resumes to the same bits."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from reliability_helpers import DEBUG_GIN, TINY
from state_compare import assert_same_tensors, final_state, records

from flowkit.checkpoints import files as checkpoint
from flowkit.errors import TrainingError
from flowkit.train import run

STEPS = 4


def _train(store: Path, out: Path, steps: int = STEPS):
    return run.train([DEBUG_GIN], list(TINY), data=[store], out=out, steps=steps, device="cpu")


@pytest.fixture(scope="module")
def reference(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "run"
    assert _train(store, out).status == "completed"
    return out


def _fail_at(monkeypatch: pytest.MonkeyPatch, module: object, name: str, nth: int) -> list[int]:
    """Make ``module.name`` raise ENOSPC from its ``nth`` call on."""
    original = getattr(module, name)
    calls = [0]

    def failing(*args, **kwargs):
        calls[0] += 1
        if calls[0] >= nth:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, failing)
    return calls


def _check_intact_and_resume(reference: Path, out: Path, info: pytest.ExceptionInfo, monkeypatch) -> None:
    message = str(info.value)
    assert "\n" not in message and "No space left" in message and "flowkit resume" in message, message
    path, skipped = checkpoint.find_latest(out / "checkpoints")
    assert path is not None and not skipped, skipped  # the previous checkpoint is whole
    assert not any(".partial-" in p.name for p in (out / "checkpoints").iterdir())
    assert not (out / "run.lock").exists()
    monkeypatch.undo()
    assert run.resume(out, device="cpu").status == "completed"
    assert_same_tensors(final_state(reference), final_state(out))
    assert records(reference) == records(out)


def test_enospc_in_torch_save_keeps_the_previous_checkpoint(reference: Path, store: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    out = tmp_path / "run"
    _fail_at(monkeypatch, torch, "save", 3)  # best/ at step 0 is not saved; step 1, 2 commit, 3 fails
    with pytest.raises(TrainingError, match=r"step \d") as info:
        _train(store, out)
    assert checkpoint.list_checkpoints(out / "checkpoints")
    _check_intact_and_resume(reference, out, info, monkeypatch)


def test_enospc_in_the_atomic_writer_keeps_checkpoints_and_metrics(reference: Path, store: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The heartbeat's atomic write fails at step 2 (after checkpoint 1 committed)."""
    from flowkit.train import workspace

    out = tmp_path / "run"
    # calls: latent_stats.json, run_info.json, heartbeat of step 1, heartbeat of step 2
    _fail_at(monkeypatch, workspace, "atomic_write_json", 4)
    with pytest.raises(TrainingError, match="step 2") as info:
        _train(store, out)
    assert not list(out.glob(".heartbeat.json.*"))  # the temporary file was removed
    _check_intact_and_resume(reference, out, info, monkeypatch)


def test_enospc_in_the_metrics_log_stops_the_run(reference: Path, store: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The 4th record (train, step 3) is cut after a few bytes by a full disk."""
    from flowkit.loggers import jsonl

    original = jsonl.JsonlLogger.log
    calls = [0]

    def log(self, record):
        calls[0] += 1
        if calls[0] == 4:
            self._file.write(jsonl.encode_record(record)[:12])
            self._file.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, record)

    monkeypatch.setattr(jsonl.JsonlLogger, "log", log)
    out = tmp_path / "run"
    with pytest.raises(TrainingError) as info:
        _train(store, out)
    lines = (out / "metrics.jsonl").read_text().split("\n")
    assert lines[-1] and not lines[-1].endswith("}")  # the torn line is there until the resume
    _check_intact_and_resume(reference, out, info, monkeypatch)
