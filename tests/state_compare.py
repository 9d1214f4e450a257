"""Comparing training states bit for bit: shared by the train, distributed and reliability tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from flowkit.checkpoints import files as checkpoint

#: fields of a metrics record that measure wall time, so differ between equal runs
TIMING = {"frames_per_s", "step_s", "data_s", "tflops", "mfu", "eval_s"}


def final_state(run_dir: Path) -> dict[str, Any]:
    """The state of ``run_dir``'s newest valid checkpoint."""
    path, skipped = checkpoint.find_latest(run_dir / "checkpoints")
    assert path is not None, skipped
    return checkpoint.load_checkpoint(path).state


def assert_same_tensors(a: Any, b: Any, where: str = "") -> None:
    """Bit-equality of nested states (tensors with torch.equal, dtype included)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert set(a) == set(b), f"{where}: keys differ {sorted(set(a) ^ set(b), key=str)}"
        for key in a:
            assert_same_tensors(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_tensors(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def records(run_dir: Path) -> list[dict[str, Any]]:
    """train and eval records of ``metrics.jsonl`` without the timing fields."""
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)  # every line must parse: no torn line may survive a resume
        if record["kind"] in ("train", "eval"):
            out.append({k: v for k, v in record.items() if k not in TIMING})
    return out
