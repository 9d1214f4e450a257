"""The user's own line, `flowkit train gin/e13_dur_emotion.gin --data STORE`, on a CPU machine:
it either refuses in one line before step 0 or says it fits and trains; the kernel never
kills it (an unchecked start would evaluate for minutes, then die at 24 GB with exit 137)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.corpus, pytest.mark.slow]  # prepares the shared corpus (~20-60 s)

REPO = Path(__file__).resolve().parents[2]


def test_e13_line_on_the_cpu_refuses_or_fits_and_is_never_killed(corpus_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "corpus.zarr"
    subprocess.run([sys.executable, "-m", "flowkit", "prepare", str(corpus_dir), "-o", str(store), "--align", "energy",
                    "--quiet", "--workers", "2"], check=True, capture_output=True, cwd=REPO)
    proc = subprocess.Popen([sys.executable, "-m", "flowkit", "train", "gin/e13_dur_emotion.gin", "--data", str(store),
                             "--out", str(tmp_path / "run"), "--device", "cpu"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("memory: estimated peak"):  # it fits this machine: it trains; stop it
            proc.send_signal(signal.SIGTERM)
            break
    out = "".join(lines) + proc.communicate(timeout=600)[0]
    assert proc.returncode not in (-signal.SIGKILL, 137), out  # never killed
    if proc.returncode != 0 and "cannot fit" in out:
        errors = [ln for ln in out.splitlines() if ln.lower().startswith("error:")]
        assert len(errors) == 1 and "this run cannot fit: estimated peak" in errors[0], out
        for fix in ("gin/cpu.gin", "batch_sampler.frame_budget.frame_budget", "Trainer.activation_checkpointing"):
            assert fix in errors[0]
        assert "train 1/" not in out  # refused before step 0
    else:
        assert any(ln.startswith("memory: estimated peak") for ln in lines), out
