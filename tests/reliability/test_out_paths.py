"""``--out`` where a file stands (or, for synthesize, a folder, or a file among its parents)
is one line before any work in every command that writes: train, eval, report, sweep,
synthesize (`flowkit.io.check_out_path`). The checkpoints and runs named do not exist:
the refusal comes before anything is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from reliability_helpers import DEBUG_GIN

from flowkit.errors import ConfigError


def _argv(command: str, out: Path, tmp_path: Path) -> list[str]:
    missing = tmp_path / "no-such-run"
    return {
        "train": ["train", DEBUG_GIN, "--out", out, "--device", "cpu"],
        "sweep": ["sweep", DEBUG_GIN, "--grid", "Trainer.lr=[1e-3, 2e-3]", "--out", out],
        "eval": ["eval", missing, "--testset", tmp_path / "meta.lst", "--out", out],
        "report": ["report", missing, "--out", out],
        "synthesize": ["synthesize", missing, "--text", "hello", "--out", out / "a.wav"],
    }[command]


def _one_line(command: str, out: Path, tmp_path: Path, capfd: pytest.CaptureFixture, exit_code: int) -> str:
    """Run ``command`` through the CLI in this process; assert it ends with ``exit_code`` and
    one non-blank line of output (no traceback), and return that line."""
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    capfd.readouterr()
    result = CliRunner().invoke(app, [str(a) for a in _argv(command, out, tmp_path)])
    err = capfd.readouterr().err + result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == exit_code, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", ["train", "sweep", "eval", "report", "synthesize"])
def test_out_that_is_a_file_is_one_line_before_any_work(command: str, tmp_path: Path,
                                                        capfd: pytest.CaptureFixture) -> None:
    out = tmp_path / "taken"
    out.write_text("mine\n")
    line = _one_line(command, out, tmp_path, capfd, ConfigError.exit_code)
    assert line.startswith("error: --out ") and "is a file" in line and str(out) in line, line
    assert out.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_check_out_path_tells_a_file_from_a_folder(tmp_path: Path) -> None:
    from flowkit.io import check_out_path

    (tmp_path / "f").write_text("")
    (tmp_path / "d").mkdir()
    check_out_path(tmp_path / "d", label="--out d", folder=True)
    check_out_path(tmp_path / "new" / "deeper", label="--out x", folder=True)
    check_out_path(tmp_path / "d" / "a.wav", label="--out a.wav", folder=False)
    with pytest.raises(ConfigError, match="is a folder; give a file name in it"):
        check_out_path(tmp_path / "d", label="--out d", folder=False)
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_out_path(tmp_path / "f", label="--out f", folder=True)
    with pytest.raises(ConfigError, match="is a file, so nothing can be written under it"):
        check_out_path(tmp_path / "f" / "x" / "y", label="--out y", folder=True)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where nothing can be created")
@pytest.mark.parametrize("command", ["train", "sweep", "eval", "synthesize"])
def test_out_where_nothing_can_be_created_is_one_line_before_any_work(command: str, tmp_path: Path,
                                                                      capfd: pytest.CaptureFixture) -> None:
    """/proc passes the read-only, permission and free-space checks and still makes no folder."""
    from flowkit.errors import WriteError

    line = _one_line(command, Path("/proc/flowkit-out"), tmp_path, capfd, WriteError.exit_code)
    assert "nothing can be created there" in line and "/proc" in line, line
    assert list(tmp_path.iterdir()) == []
