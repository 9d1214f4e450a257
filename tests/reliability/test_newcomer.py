"""A newcomer's first hour: output meant to be read back is never wrapped, an installed
third-party plugin is listed with its summary and parameters, and synthesize reports the
length of the audio it wrote."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reliability_helpers import DEBUG_GIN, REPO

from flowkit import config


def test_config_output_reads_back_at_80_columns(tmp_path: Path) -> None:
    """Piped (80 columns), a long file path and a long binding stay on their comment lines,
    so the printed config parses again and binds the same values."""
    deep = tmp_path / ("a-folder-with-a-long-name-" * 4) / "experiment.gin"
    deep.parent.mkdir(parents=True)
    deep.write_text(f"include '{DEBUG_GIN}'\nTrainer.steps = 7\n")
    binding = "Trainer.cfg_drop = {'both_p': 0.15, 'prompt_p': 0.25, 'text_p': 0.05}"
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    out = subprocess.run([sys.executable, "-m", "flowkit", "config", str(deep), "-b", binding], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert any(len(line) > 80 for line in out.stdout.splitlines())  # a long line, left whole
    resolved = tmp_path / "resolved.gin"
    resolved.write_text(out.stdout)
    first = config.parse([deep], [binding]).text
    again = config.parse([resolved]).text
    assert again == first


def test_an_installed_plugin_is_listed_with_its_summary_and_parameters() -> None:
    """plugins/flowkit-tsamplers is installed by make setup, as a third-party plugin would be."""
    env = {k: v for k, v in os.environ.items() if k != "FLOWKIT_NO_PLUGINS"}
    table = subprocess.run([sys.executable, "-m", "flowkit", "plugins", "t_sampler"], capture_output=True, text=True,
                           env={**env, "COLUMNS": "200"}, cwd=REPO, timeout=300)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    at = lines.index("t_sampler.mode  (flowkit-tsamplers)")
    assert "Mode sampling" in lines[at + 1] and lines[at + 2].strip() == "parameters: scale=1.29", lines[at:at + 3]
    assert "not imported" not in table.stdout
    markdown = subprocess.run([sys.executable, "-m", "flowkit", "plugins", "--markdown"], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=300)
    assert "### `t_sampler.cosmap`" in markdown.stdout and "| `scale` |" in markdown.stdout


def test_synthesize_reports_the_seconds_it_wrote(tmp_path: Path) -> None:
    import soundfile as sf

    sys.path.insert(0, str(REPO / "tests"))
    from tiny_checkpoint import save_tiny_checkpoint

    from flowkit.synth.synthesize import synthesize_file

    save_tiny_checkpoint(tmp_path / "run", ["hello there"])
    result = synthesize_file(tmp_path / "run", "hello", tmp_path / "a.wav", seconds=0.5, steps=1)
    audio, sr = sf.read(str(tmp_path / "a.wav"))
    assert result.seconds == len(audio) / sr  # exact: both count the samples written
    assert result.frames == 50
