"""`flowkit resume` of a finished run trains nothing and changes no file of the run."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def digest(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file() and p.name != "run.lock"}


def test_resume_of_a_complete_run_touches_nothing(tmp_path):
    run = tmp_path / "run"
    flowkit = [sys.executable, "-m", "flowkit"]
    subprocess.run([*flowkit, "train", "gin/debug.gin", "--out", str(run), "--steps", "2",
                    "-b", "Trainer.eval_every = 2", "-b", "Trainer.save_every = 2"],
                   cwd=REPO, check=True, capture_output=True)
    before = digest(run)
    out = subprocess.run([*flowkit, "resume", str(run)], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "already complete (2/2 steps)" in out.stdout
    assert digest(run) == before
    assert not list(run.glob("resume_info-*.json"))


def test_resume_of_a_missing_directory_says_so(tmp_path):
    out = subprocess.run([sys.executable, "-m", "flowkit", "resume", str(tmp_path / "nope")],
                         cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 4
    assert "does not exist" in out.stderr and "Traceback" not in out.stderr
