"""jsonl logger: one fsynced JSON line per record, truncation for resume, torn lines."""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from flowkit.loggers.jsonl import JsonlLogger, encode_record, read_records, truncate_after_step
from flowkit.registry import get


def _write(tmp_path, records, **open_kw):
    logger = JsonlLogger()
    logger.open(tmp_path, resumed=False, total_steps=10, start_step=0, **open_kw)
    for r in records:
        logger.log(r)
    logger.close()
    return tmp_path / "metrics.jsonl"


def test_one_line_per_record_in_order(tmp_path):
    records = [{"kind": "train", "step": s, "loss": 1.0 / s} for s in range(1, 4)]
    path = _write(tmp_path, records)
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == records
    assert list(json.loads(lines[0])) == ["kind", "step", "loss"]  # insertion order kept


def test_append_across_opens(tmp_path):
    _write(tmp_path, [{"kind": "train", "step": 1}])
    _write(tmp_path, [{"kind": "train", "step": 2}])
    assert [r["step"] for r in read_records(tmp_path / "metrics.jsonl")] == [1, 2]


def test_values_become_plain_json():
    line = encode_record(
        {
            "kind": "eval",
            "step": np.int64(3),
            "a": np.float32(0.5),
            "b": torch.tensor(2.0),
            "nan": math.nan,
            "inf": float("inf"),
            "t": (1, 2),
            "ok": True,
        }
    )
    assert json.loads(line) == {
        "kind": "eval",
        "step": 3,
        "a": 0.5,
        "b": 2.0,
        "nan": None,
        "inf": None,
        "t": [1, 2],
        "ok": True,
    }


def test_truncate_after_step_drops_later_steps_and_torn_lines(tmp_path):
    path = _write(
        tmp_path,
        [{"kind": "train", "step": s} for s in range(1, 6)] + [{"kind": "event", "event": "start"}],
    )
    with path.open("a") as f:
        f.write('{"kind": "train", "st')  # a write cut by kill -9
    assert truncate_after_step(path, 3) == 3
    assert read_records(path) == [{"kind": "train", "step": s} for s in range(1, 4)] + [
        {"kind": "event", "event": "start"}
    ]
    assert path.read_text().endswith("\n")
    assert truncate_after_step(path, 3) == 0
    assert truncate_after_step(tmp_path / "absent.jsonl", 0) == 0


def test_open_cuts_a_torn_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"kind": "train", "step": 1}\n{"kind": "tr')
    _write(tmp_path, [{"kind": "train", "step": 2}])
    assert path.read_text().splitlines() == [
        '{"kind": "train", "step": 1}',
        '{"kind": "train", "step": 2}',
    ]


def test_registered():
    assert get("logger", "jsonl").obj is JsonlLogger
