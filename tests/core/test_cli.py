"""The command line: start-up without heavy imports, one-line errors, plugins and config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowkit.cli.app import app

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "zarr", "gin", "numpy", "librosa", "matplotlib")
COMMANDS = ("train", "resume", "init-from", "report", "prepare", "plugins", "config", "synthesize")


def run_cli(*args):
    result = CliRunner().invoke(app, list(args))
    return result


@pytest.mark.parametrize("argv", [["--help"]] + [[c, "--help"] for c in COMMANDS])
def test_help_imports_nothing_heavy(argv):
    code = (
        "import sys\n"
        "from flowkit.cli.app import app\n"
        "try:\n"
        f"    app({argv!r}, prog_name='flowkit')\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout, out.stdout[-500:]
    assert "Usage" in out.stdout


def test_unknown_command_suggests():
    result = run_cli("trian")
    assert result.exit_code == 2
    assert "Did you mean 'train'?" in result.output


def test_plugins_table_lists_builtin_and_third_party():
    result = run_cli("plugins", "t_sampler")
    assert result.exit_code == 0, result.output
    assert "logit_normal" in result.output
    assert "flowkit-tsamplers" in result.output
    assert "mode" in result.output


def test_plugins_markdown_is_the_gin_reference():
    result = run_cli("plugins", "--markdown")
    assert result.exit_code == 0, result.output
    assert "### `schedule.flow_matching`" in result.output
    assert "| `sigma_min` | `float` |" in result.output


def test_plugins_unknown_kind_is_one_line():
    result = run_cli("plugins", "shedule")
    assert result.exit_code == 2
    assert "did you mean 'schedule'" in result.output
    assert "Traceback" not in result.output


def test_config_prints_the_resolved_view(tmp_path):
    exp = tmp_path / "e.gin"
    exp.write_text("schedule.flow_matching.sigma_min = 0.1\n")
    result = run_cli("config", str(exp), "-b", "schedule.flow_matching.sigma_min = 0.3")
    assert result.exit_code == 0, result.output
    assert "schedule.flow_matching.sigma_min = 0.3" in result.output


def test_config_error_is_one_line_and_nonzero(tmp_path):
    exp = tmp_path / "e.gin"
    exp.write_text("schedule.flow_matching.sigma_mn = 0.1\n")
    result = run_cli("config", str(exp))
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert "did you mean 'sigma_min'" in lines[0]


def test_debug_shows_the_traceback(tmp_path):
    exp = tmp_path / "e.gin"
    exp.write_text("schedule.flow_matching.sigma_mn = 0.1\n")
    out = subprocess.run([sys.executable, "-m", "flowkit", "--debug", "config", str(exp)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode != 0
    assert "Traceback" in out.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "gin").glob("*.gin")))
def test_every_shipped_gin_file_parses(name):
    """Given its one required value (gin/base.gin's DATA; tests/train/test_gin_layers.py
    checks that leaving it unset fails)."""
    result = run_cli("config", str(REPO / "gin" / name), "-b", "DATA = []")
    assert result.exit_code == 0, result.output


def test_version_alone_prints_the_version():
    import subprocess
    import sys

    from flowkit import __version__

    out = subprocess.run([sys.executable, "-m", "flowkit", "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"flowkit {__version__}"


def test_plugins_reads_at_80_columns_piped_without_broken_words():
    import os

    from flowkit import registry

    env = {**os.environ, "COLUMNS": "80"}
    out = subprocess.run([sys.executable, "-m", "flowkit", "plugins"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(ln) <= 80 or " " not in ln.strip() for ln in lines)
    words = set(out.stdout.split())
    registry.load_plugins()
    for c in registry.components():
        if c.distribution != "flowkit":  # third-party entries are listed by name, not imported
            assert c.gin_name in words, c.gin_name
            continue
        for word in c.summary.split():  # every word of every summary comes out whole
            assert word in words, (c.gin_name, word)


def test_plugins_trainer_shows_the_trainer_settings():
    out = subprocess.run([sys.executable, "-m", "flowkit", "plugins", "Trainer"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "did you mean" not in out.stdout + out.stderr
    text = " ".join(out.stdout.split())
    for setting in ("steps=", "lr=", "save_every=", "nonfinite="):
        assert setting in text, setting
