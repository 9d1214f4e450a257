"""Reading run directories in every state a report meets."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import write_synthetic_run

from flowkit.errors import FlowkitError
from flowkit.report.rundir import NotARunError, read_run


@pytest.mark.parametrize(
    ("state", "expected"),
    [("completed", "completed"), ("interrupted", "interrupted"), ("in_progress", "in progress"),
     ("stopped_early", "stopped early")],
)
def test_state_of_each_kind_of_run(tmp_path: Path, state: str, expected: str) -> None:
    run = read_run(write_synthetic_run(tmp_path / state, state))
    assert run.state == expected
    assert run.total_steps == 40
    assert run.step == (40 if state == "completed" else 20)


def test_torn_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    run = read_run(write_synthetic_run(tmp_path / "live", "in_progress"))
    assert run.torn_lines == 1
    steps, losses = run.series("train", "loss")
    assert steps == list(range(2, 21, 2)) and len(losses) == 10


def test_newest_record_of_a_step_wins(tmp_path: Path) -> None:
    root = write_synthetic_run(tmp_path / "r", "completed")
    with (root / "metrics.jsonl").open("a") as f:
        f.write('{"kind": "train", "step": 40, "loss": 0.125}\n')
    steps, losses = read_run(root).series("train", "loss")
    assert steps[-1] == 40 and losses[-1] == 0.125 and steps.count(40) == 1


def test_incomplete_checkpoint_is_listed_but_not_used(tmp_path: Path) -> None:
    run = read_run(write_synthetic_run(tmp_path / "r", "stopped_early"))
    assert [c.complete for c in run.checkpoints] == [True, True, False]
    assert run.latest_checkpoint is not None and run.latest_checkpoint.step == 20


def test_rejections_counted_by_split_and_reason(tmp_path: Path) -> None:
    run = read_run(write_synthetic_run(tmp_path / "r", "completed"))
    assert run.rejection_counts() == {"train": {"too_short": 2}}


def test_refuses_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(NotARunError, match=r"is not a flowkit run .*flowkit train --out"):
        read_run(tmp_path)
    with pytest.raises(FlowkitError, match="is not a directory"):
        read_run(tmp_path / "missing")


def test_two_resumes_from_one_step_are_both_in_the_history(tmp_path: Path) -> None:
    """A resume killed before its next checkpoint, then resumed again from the same step:
    the workspace keeps both resume_info files and the report lists both, in order."""
    from flowkit.train.workspace import Workspace

    root = write_synthetic_run(tmp_path / "run", "interrupted")
    ws = Workspace(root)
    first = ws.write_run_info({"device": "cpu", "attempt": 1}, resumed_at=20)
    second = ws.write_run_info({"device": "cpu", "attempt": 2}, resumed_at=20)
    later = ws.write_run_info({"device": "cpu", "attempt": 3}, resumed_at=30)
    assert [p.name for p in (first, second, later)] == [
        "resume_info-00000020.json", "resume_info-00000020.2.json", "resume_info-00000030.json"]
    run = read_run(root)
    assert [(step, info["attempt"]) for step, info in run.resumes] == [(20, 1), (20, 2), (30, 3)]
