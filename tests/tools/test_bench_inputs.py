"""The benchmarks' bad inputs: one line naming the flag or path and the fix, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("argv", "says", "code"), [
    (["bench_peer.py", "/nonexistent", "--pairs", "0"], "--pairs must be at least 1, got 0", 2),
    (["bench_sampling.py", "/nonexistent", "--batch", "1", "0"], "--batch must be at least 1, got 0", 2),
    (["bench_vocoder.py", "--seconds", "0"], "--seconds must be at least 0.1", 2),
    (["bench_vocoder.py", "--path", "/nonexistent/vocos", "--repeats", "1"], "Vocos directory /nonexistent/vocos",
     None),
    (["bench_trainer.py", "--stall-steps", "2"], "--stall-steps must be at least 3, got 2", 2),
    (["bench_trainer.py", "--corpus", "/nonexistent/c.zarr"], "/nonexistent/c.zarr: no such store", None),
])
def test_a_bad_input_is_one_line(argv: list[str], says: str, code: int | None) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert proc.returncode != 0 if code is None else proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert says in last and last.startswith(f"{argv[0]}: "), proc.stderr
