"""A rank that fails or hangs ends the run with a message naming it, instead of a hang.

The failure is injected into one torchrun worker by tests/distributed/watch/sitecustomize.py
(``FLOWKIT_TEST_FAIL_RANK``); the error translation itself is checked in-process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from distributed_helpers import torchrun_train

from flowkit.errors import DataError, TrainingError
from flowkit.train import distributed


def test_a_failing_rank_is_named_and_the_run_stops(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = torchrun_train(out, 4, "Trainer.eval_every = None", env_extra={"FLOWKIT_TEST_FAIL_RANK": "1"})
    assert result.returncode != 0
    assert "rank 1 failed: RuntimeError: injected failure" in result.stderr
    # The first step was saved by rank 0 (save_every = 1); nothing after the failure.
    assert sorted(p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith(".")) == ["step-00000001"]


@pytest.mark.slow
def test_a_hanging_rank_times_out_the_others(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = torchrun_train(out, 4, "Trainer.eval_every = None", "Trainer.dist_timeout_s = 10",
                            env_extra={"FLOWKIT_TEST_FAIL_RANK": "1", "FLOWKIT_TEST_FAIL_MODE": "hang"})
    assert result.returncode != 0
    assert "rank 0: lost contact with the other ranks" in result.stderr


def _fails(exc: BaseException) -> None:
    raise exc


def test_errors_name_the_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    wrapped = distributed.name_rank_in_errors(_fails)
    with pytest.raises(DataError, match=r"^rank 1 failed: no segment in store x$"):
        wrapped(DataError("no segment in store x"))
    with pytest.raises(TrainingError, match=r"^rank 1: lost contact with the other ranks \(RuntimeError: "
                                            r".*Connection closed by peer"):
        wrapped(RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242"))
    with pytest.raises(ZeroDivisionError):
        wrapped(ZeroDivisionError("bug"))


def test_one_process_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(DataError, match=r"^plain$"):
        distributed.name_rank_in_errors(_fails)(DataError("plain"))
    ctx, device = distributed.setup(__import__("torch").device("cpu"), timeout_s=1)
    assert not ctx.enabled and ctx.is_main and device.type == "cpu"
    assert distributed.all_sum(ctx, [1, 2.5]) == [1.0, 2.5]
    assert distributed.gather_objects(ctx, {"a": 1}) == [{"a": 1}]
    assert distributed.broadcast_object(ctx, 3) == 3
