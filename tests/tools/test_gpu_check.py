"""tools/gpu_check.py in its CPU mode (tiny preset): throughput lines and a kill -9 + resume
that ends with bit-identical weights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_on_the_cpu_with_the_tiny_preset() -> None:
    # Compilation is covered by tests/model/test_compile.py; here it would double the time.
    result = subprocess.run([sys.executable, "tools/gpu_check.py", "--tiny", "--no-compile", "--steps", "2"],
                            cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "preset tiny" in result.stdout
    eager = next(line for line in result.stdout.splitlines() if line.startswith("eager"))
    assert "frames/s" in eager and "TFLOPS" in eager and "estimate" in eager
    assert "weights bit-identical: True" in result.stdout
