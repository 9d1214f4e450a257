"""`flowkit report` on synthetic run directories: one run, several runs, odd states."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_helpers import write_synthetic_run
from typer.testing import CliRunner

from flowkit.cli.app import app
from flowkit.report.build import write_report

PNG_URI = re.compile(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"')


@pytest.mark.parametrize("state", ["completed", "interrupted", "in_progress", "stopped_early"])
def test_single_run_report(tmp_path: Path, state: str) -> None:
    root = write_synthetic_run(tmp_path / state, state)
    files = write_report([root])
    assert files.markdown == root / "report.md" and files.html == root / "report.html"
    md = files.markdown.read_text()
    html = files.html.read_text()
    expected = {"completed": "completed", "interrupted": "interrupted", "in_progress": "in progress",
                "stopped_early": "stopped early"}[state]
    assert f"- state: {expected}" in md
    assert "| train | 12 | 10 | 2 | too_short: 2 |" in md
    for name in ("loss", "val_loss", "lr", "grad_norm", "frames_per_s"):
        assert f"](report_files/{name}.png)" in md
        assert (root / "report_files" / f"{name}.png").stat().st_size > 1000
    assert len(PNG_URI.findall(html)) == 5
    assert "Trainer.lr = 0.001" in md and "Trainer.lr = 0.001" in html
    if state == "in_progress":
        assert "1 unreadable line(s) skipped" in md


def test_run_without_validation_data(tmp_path: Path) -> None:
    root = write_synthetic_run(tmp_path / "noval", "completed", val=False)
    md = write_report([root]).markdown.read_text()
    assert "No validation data" in md
    assert "val_loss.png" not in md and "loss.png" in md


def test_samples_on_a_run_without_checkpoints_say_why(tmp_path: Path) -> None:
    root = write_synthetic_run(tmp_path / "r", "in_progress")
    for ckpt in (root / "checkpoints").iterdir():
        (ckpt / "COMPLETE").unlink()
    md = write_report([root], samples=2).markdown.read_text()
    assert "No samples:" in md


def test_comparison_of_two_runs(tmp_path: Path) -> None:
    a = write_synthetic_run(tmp_path / "a", "completed")
    b = write_synthetic_run(tmp_path / "b", "interrupted", config_extra="Trainer.ema_decay = 0.99\n")
    out = tmp_path / "cmp"
    files = write_report([a, b], out=out)
    md = files.markdown.read_text()
    assert "# Comparison of 2 runs: a, b" in md
    assert "| Trainer.ema_decay | - | 0.99 |" in md
    assert "| a | completed | 40 / 40 |" in md and "| b | interrupted | 20 / 40 |" in md
    assert (out / "report_files" / "compare-loss.png").is_file()
    assert "## a: Summary" in md and "## b: Summary" in md
    assert len(PNG_URI.findall(files.html.read_text())) >= 10
    assert "Caution" not in md  # same schedule and t-sampler: the losses compare


def test_comparison_warns_when_losses_measure_different_things(tmp_path: Path) -> None:
    a = write_synthetic_run(tmp_path / "a", "completed")
    b = write_synthetic_run(tmp_path / "b", "completed", config_extra="Trainer.schedule = @schedule.cosine_vpred()\n")
    md = write_report([a, b], out=tmp_path / "cmp").markdown.read_text()
    assert "Caution: the runs differ in Trainer.schedule" in md


def test_cli_report_and_refusal(tmp_path: Path) -> None:
    root = write_synthetic_run(tmp_path / "r", "completed")
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(root), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o" / "report.html").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["report", str(empty)])
    assert result.exit_code == 3, result.output
    assert "is not a flowkit run" in result.output and "Traceback" not in result.output
