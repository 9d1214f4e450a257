"""The always-on metrics log: ``metrics.jsonl`` in the run directory.

One JSON object per line, appended, flushed and fsynced per record, so a kill loses at
most the line being written. Such a torn last line, and the records of steps a resumed run
will replay, are removed by `truncate_after_step` (the trainer calls it on resume), which
is what lets a resumed run's file equal the uninterrupted run's line for line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import attrs

from flowkit.io import atomic_write_text
from flowkit.loggers.records import plain
from flowkit.registry import register

__all__ = ["JsonlLogger", "encode_record", "read_records", "truncate_after_step"]


def encode_record(record: Mapping[str, Any]) -> str:
    """One JSON line (no newline) for ``record``; keys keep their order, NaN becomes null."""
    return json.dumps(plain(record), ensure_ascii=False, allow_nan=False)


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every parseable record of ``path`` (a torn or corrupt line is skipped); [] if absent."""
    records = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def truncate_after_step(path: str | os.PathLike[str], step: int) -> int:
    """Drop the records of steps after ``step`` and every unparseable line; return how many.

    Records without an integer ``step`` are kept. The file is rewritten atomically (a kill
    during the rewrite leaves the old file). A missing file removes nothing.
    """
    target = Path(path)
    try:
        lines = target.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return 0
    kept, removed = [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            removed += 1
            continue
        record_step = record.get("step") if isinstance(record, dict) else None
        if (
            isinstance(record_step, int)
            and not isinstance(record_step, bool)
            and record_step > step
        ):
            removed += 1
            continue
        kept.append(line)
    if removed:
        atomic_write_text(target, "".join(line + "\n" for line in kept))
    return removed


def _cut_torn_tail(path: Path) -> None:
    """Cut a last line without its newline (a write interrupted by a kill), so the next
    record starts on a line of its own."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        f.seek(0)
        data = f.read()
        f.truncate(data.rfind(b"\n") + 1)
        f.flush()
        os.fsync(f.fileno())


@register("logger", "jsonl")
@attrs.define
class JsonlLogger:
    """Append-only JSON-lines metrics file, one fsynced record per line.

    The trainer always adds it (resume checks and reports read it). ``fsync=False`` trades
    the last records on a power cut for speed on slow network filesystems.
    """

    filename: str = "metrics.jsonl"
    fsync: bool = True
    path: Path | None = attrs.field(init=False, default=None)
    _file: IO[str] | None = attrs.field(init=False, default=None, repr=False)

    def open(self, run_dir: Path, *, resumed: bool, total_steps: int, start_step: int) -> None:
        self.path = Path(run_dir) / self.filename
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _cut_torn_tail(self.path)
        self._file = self.path.open("a", encoding="utf-8")

    def log(self, record: Mapping[str, Any]) -> None:
        if self._file is None:
            raise RuntimeError("JsonlLogger.log before open")
        self._file.write(encode_record(record) + "\n")
        self._file.flush()
        if self.fsync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
