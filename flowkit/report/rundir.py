"""Reading a run directory tolerantly: whatever a run has written so far, as plain values.

A run may be finished, interrupted, crashed or still training while it is read, so every
file is optional except the signs that the directory is a run at all, and the last line
of ``metrics.jsonl`` may be torn (a writer caught mid-line). Nothing here imports torch:
checkpoints are listed from their directory names, markers and ``meta.json``.

Layout read (written by `flowkit.train.workspace.Workspace`): ``metrics.jsonl``,
``heartbeat.json``, ``run.lock``, ``run_info.json``, ``resume_info-<step>.json``,
``data_rejections.jsonl``, ``latent_stats.json``, ``config.gin``, ``checkpoints/step-*/``,
``best/step-*/``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import DataError
from flowkit.processes import pid_alive

__all__ = [
    "HEARTBEAT_STALE_S",
    "CheckpointEntry",
    "NotARunError",
    "RunDir",
    "read_run",
]

#: A heartbeat older than this (seconds) with no live lock holder means the process is gone.
HEARTBEAT_STALE_S = 600.0

_STEP_DIR = re.compile(r"^step-(\d+)$")
_RESUME_INFO = re.compile(r"^resume_info-(\d+)(?:\.(\d+))?\.json$")
# Files only a run writes; a directory with none of them is not a run.
_RUN_MARKERS = ("metrics.jsonl", "run_info.json", "config.gin", "heartbeat.json", "checkpoints")


class NotARunError(DataError):
    """A path given as a run directory holds no run."""


@attrs.frozen
class CheckpointEntry:
    """One checkpoint directory: its step, path, whether it was committed, and its meta."""

    step: int
    path: Path
    complete: bool
    meta: Mapping[str, Any]

    @property
    def bytes(self) -> int:
        """Size of the checkpoint's files on disk (0 when the directory is gone)."""
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file()) if self.path.is_dir() else 0


@attrs.frozen
class RunDir:
    """Everything read from one run directory (see `read_run`).

    Attributes:
        path: the run directory.
        records: ``metrics.jsonl`` records in file order (torn or invalid lines skipped).
        torn_lines: how many lines could not be parsed; torn_inside: one of them is not the
            last line (a damaged file: figures may lack what those lines held).
        heartbeat, run_info, latent_stats, lock: the JSON files, ``{}`` when absent.
        resumes: ``(step, info)`` of every ``resume_info-<step>[.<k>].json``, by step and k.
        rejections: ``data_rejections.jsonl`` records.
        config_text: ``config.gin`` ("" when absent).
        checkpoints, best: checkpoint directories, oldest first.
        damaged: names of the run's JSON files that exist but do not parse (read as ``{}``).
    """

    path: Path
    records: tuple[Mapping[str, Any], ...]
    torn_lines: int
    heartbeat: Mapping[str, Any]
    run_info: Mapping[str, Any]
    resumes: tuple[tuple[int, Mapping[str, Any]], ...]
    rejections: tuple[Mapping[str, Any], ...]
    latent_stats: Mapping[str, Any]
    config_text: str
    checkpoints: tuple[CheckpointEntry, ...]
    best: tuple[CheckpointEntry, ...]
    lock: Mapping[str, Any]
    now: float
    torn_inside: bool = False
    damaged: tuple[str, ...] = ()

    # ---- metrics ----

    def series(self, kind: str, key: str) -> tuple[list[int], list[float]]:
        """``(steps, values)`` of ``key`` in records of ``kind``; the newest record of a step wins
        (a resumed run may repeat steps an interrupted writer had logged)."""
        by_step: dict[int, float] = {}
        for r in self.records:
            if r.get("kind") != kind or not isinstance(r.get("step"), int):
                continue
            value = r.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                by_step[r["step"]] = float(value)
        steps = sorted(by_step)
        return steps, [by_step[s] for s in steps]

    def metric_keys(self, kind: str) -> list[str]:
        """Numeric keys that appear in records of ``kind``, in first-seen order."""
        seen: dict[str, None] = {}
        for r in self.records:
            if r.get("kind") != kind:
                continue
            for k, v in r.items():
                if k not in ("kind", "step") and isinstance(v, (int, float)) and not isinstance(v, bool):
                    seen.setdefault(k, None)
        return list(seen)

    def eval_records(self) -> list[Mapping[str, Any]]:
        """One eval record per step (the newest), by step."""
        by_step: dict[int, Mapping[str, Any]] = {}
        for r in self.records:
            if r.get("kind") == "eval" and isinstance(r.get("step"), int):
                by_step[r["step"]] = r
        return [by_step[s] for s in sorted(by_step)]

    def events(self) -> list[Mapping[str, Any]]:
        return [r for r in self.records if r.get("kind") == "event"]

    # ---- steps and state ----

    @property
    def step(self) -> int:
        """The furthest step the run is known to have reached."""
        candidates = [r["step"] for r in self.records if isinstance(r.get("step"), int)]
        candidates += [c.step for c in self.checkpoints if c.complete]
        if isinstance(self.heartbeat.get("step"), int):
            candidates.append(self.heartbeat["step"])
        return max(candidates, default=0)

    @property
    def total_steps(self) -> int | None:
        """The configured number of steps (heartbeat, else ``Trainer.steps`` in config.gin)."""
        if isinstance(self.heartbeat.get("total_steps"), int):
            return int(self.heartbeat["total_steps"])
        for info in [self.run_info, *(i for _, i in reversed(self.resumes))]:
            for key in ("total_steps", "steps"):
                if isinstance(info.get(key), int):
                    return int(info[key])
        match = re.search(r"^Trainer\.steps\s*=\s*(\d+)", self.config_text, re.MULTILINE)
        return int(match.group(1)) if match else None

    @property
    def heartbeat_age_s(self) -> float | None:
        """Seconds between the last heartbeat and ``now`` (None without a heartbeat)."""
        t = self.heartbeat.get("time")
        return self.now - float(t) if isinstance(t, (int, float)) else None

    def lock_holder_alive(self) -> bool | None:
        """Whether the process in ``run.lock`` lives (None: no lock, or another host's)."""
        pid, host = self.lock.get("pid"), self.lock.get("host")
        if not isinstance(pid, int):
            return None
        if host is not None and host != socket.gethostname():
            return None
        return pid_alive(pid)

    @property
    def state(self) -> str:
        """"completed", "in progress", "interrupted" or "stopped early".

        Completed: the configured steps were reached. In progress: ``run.lock`` is held by a
        live process (a lock of another host counts while the heartbeat is fresh); the
        trainer removes the lock when it exits, so no lock means no process. Interrupted:
        the last record is the trainer's "stopped" event (SIGTERM / Ctrl-C, checkpoint
        written). Stopped early: anything else (an error, kill -9, a lost machine).
        """
        total = self.total_steps
        if total is not None and self.step >= total:
            return "completed"
        if self.lock:
            alive = self.lock_holder_alive()
            age = self.heartbeat_age_s
            if alive or (alive is None and age is not None and age < HEARTBEAT_STALE_S):
                return "in progress"
        if self._stopped_last():
            return "interrupted"
        return "stopped early"

    def _stopped_last(self) -> bool:
        for r in reversed(self.records):
            if r.get("kind") in ("train", "eval", "event"):
                return r.get("kind") == "event" and r.get("event") == "stopped"
        return False

    # ---- data, checkpoints ----

    def rejection_counts(self) -> dict[str, dict[str, int]]:
        """``{split: {reason: count}}`` from ``data_rejections.jsonl``."""
        out: dict[str, Counter[str]] = {}
        for r in self.rejections:
            split = str(r.get("split") or "?")
            out.setdefault(split, Counter())[str(r.get("reason") or "?")] += 1
        return {s: dict(sorted(c.items())) for s, c in sorted(out.items())}

    @property
    def best_checkpoint(self) -> CheckpointEntry | None:
        done = [c for c in self.best if c.complete]
        return done[-1] if done else None

    @property
    def latest_checkpoint(self) -> CheckpointEntry | None:
        done = [c for c in self.checkpoints if c.complete]
        return done[-1] if done else None

    def newest_meta(self) -> Mapping[str, Any]:
        """``meta.json`` of the newest committed checkpoint (best or regular), ``{}`` if none."""
        entries = [c for c in (*self.checkpoints, *self.best) if c.complete and c.meta]
        return max(entries, key=lambda c: c.step).meta if entries else {}

    def info(self, *keys: str) -> Any:
        """The first of ``keys`` found in the newest resume info, run info, then checkpoint meta."""
        sources = [i for _, i in reversed(self.resumes)] + [self.run_info, self.newest_meta()]
        for key in keys:
            for source in sources:
                if source.get(key) not in (None, "", {}):
                    return source[key]
        return None

    @property
    def label(self) -> str:
        return self.path.name or str(self.path)


def _read_json(path: Path, damaged: list[str] | None = None) -> dict[str, Any]:
    """A JSON object from ``path``; ``{}`` when missing or unreadable (a report never fails on
    it). A file that exists but is not a JSON object is named in ``damaged``."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        value = None
    if not isinstance(value, dict):
        if damaged is not None:
            damaged.append(path.name)
        return {}
    return value


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int, bool]:
    """Records of a JSON-lines file, the number of lines that did not parse, and whether one
    of those is not the last line (a damaged file, not a writer caught mid-line)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return [], 0, False
    records, bad, inside = [], 0, False
    lines = [line for line in raw.split(b"\n") if line.strip()]
    for k, line in enumerate(lines):
        try:
            value = json.loads(line)
        except ValueError:  # a torn last line of a run being written, or a damaged file
            value = None
        if isinstance(value, dict):
            records.append(value)
        else:
            bad += 1
            inside = inside or k < len(lines) - 1
    return records, bad, inside


def _checkpoints(root: Path) -> tuple[CheckpointEntry, ...]:
    if not root.is_dir():
        return ()
    found = []
    for entry in root.iterdir():
        match = _STEP_DIR.match(entry.name)
        if match and entry.is_dir():
            found.append(
                CheckpointEntry(
                    step=int(match.group(1)),
                    path=entry,
                    complete=(entry / "COMPLETE").is_file(),
                    meta=_read_json(entry / "meta.json"),
                )
            )
    return tuple(sorted(found, key=lambda c: c.step))


def read_run(path: str | os.PathLike[str], *, now: float | None = None) -> RunDir:
    """Read whatever run ``path`` holds.

    Raises:
        NotARunError: ``path`` is not a directory, or holds none of a run's files
            (metrics.jsonl, run_info.json, config.gin, heartbeat.json, checkpoints/).
    """
    from flowkit import hub

    root = hub.resolve(path, kind="dir")  # hf://OWNER/REPO/RUN: a run kept on the Hugging Face Hub
    if not root.is_dir():
        raise NotARunError(f"{root} is not a directory; give a run directory made by `flowkit train --out`")
    if not any((root / m).exists() for m in _RUN_MARKERS):
        raise NotARunError(
            f"{root} is not a flowkit run (no metrics.jsonl, run_info.json, config.gin or checkpoints/); "
            "give a directory made by `flowkit train --out`"
        )
    records, torn, torn_inside = _read_jsonl(root / "metrics.jsonl")
    rejections, _, _ = _read_jsonl(root / "data_rejections.jsonl")
    damaged: list[str] = []
    resumes = []
    for entry in root.iterdir():
        match = _RESUME_INFO.match(entry.name)
        if match:
            resumes.append((int(match.group(1)), int(match.group(2) or 1), _read_json(entry, damaged)))
    try:
        config_text = (root / "config.gin").read_text(encoding="utf-8")
    except OSError:
        config_text = ""
    return RunDir(
        path=root,
        records=tuple(records),
        torn_lines=torn,
        heartbeat=_read_json(root / "heartbeat.json", damaged),
        run_info=_read_json(root / "run_info.json", damaged),
        resumes=tuple((step, info) for step, _, info in sorted(resumes, key=lambda x: x[:2])),
        rejections=tuple(rejections),
        latent_stats=_read_json(root / "latent_stats.json", damaged),
        config_text=config_text,
        checkpoints=_checkpoints(root / "checkpoints"),
        best=_checkpoints(root / "best"),
        lock=_read_json(root / "run.lock"),
        now=time.time() if now is None else now,
        torn_inside=torn_inside,
        damaged=tuple(sorted(damaged)),
    )
