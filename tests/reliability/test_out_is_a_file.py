"""`--out` naming an existing file is one line before any work for average and curate too, and
an error quoting the user's text prints it as written (no emoji codes)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from flowkit.cli.app import app


def test_average_and_curate_refuse_a_file_as_out(tmp_path: Path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    runner = CliRunner()
    for argv in (["average", str(tmp_path / "run"), "--last", "1", "--out", str(afile)],
                 ["curate", str(tmp_path), "--out", str(afile), "--quiet"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2, (argv, result.output)
        assert f"--out {afile}" in result.output and "Traceback" not in result.output
        assert afile.read_text() == "x"


def test_an_error_prints_emoji_codes_as_written(tmp_path: Path):
    bad = tmp_path / "markup.gin"
    bad.write_text("include 'base.gin'\nTrainer.lr = 1 [/bold] :x: [red]\n")
    result = CliRunner().invoke(app, ["config", str(bad)])
    assert result.exit_code == 2
    assert ":x:" in result.output and "\u274c" not in result.output
