"""The run directory: where each file of a run lives, and the lock that guards it.

Layout (``flowkit train --out RUN``)::

    RUN/run.lock                  pid + host of the process training here (refuses a second)
    RUN/checkpoints/step-*/       newest ``keep_last`` checkpoints (flowkit.checkpoints.files)
    RUN/best/step-*/              the checkpoint with the lowest EMA validation loss
    RUN/metrics.jsonl             append-only records (train / eval / event), one per line
    RUN/heartbeat.json            step, time and pid, rewritten atomically at each log step
    RUN/run_info.json             config, seed, git commit, device, data fingerprint, load
                                  reports, init-from of the first start
    RUN/resume_info-<step>.json   the same for each resume
    RUN/data_rejections.jsonl     segments the data loader rejected, with the reason
    RUN/latent_stats.json         per-channel mean/std the model's latents are normalised by
    RUN/config.gin                the full resolved config
    RUN/config_sources/           the exact gin files it came from
    RUN/report.md                 a short summary written when the run stops

Every file except the append-only metrics is written atomically (flowkit.io).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import ResumeError, TrainingError
from flowkit.io import atomic_write_json, atomic_write_text
from flowkit.processes import pid_alive

__all__ = ["RunLock", "Workspace", "git_commit"]


@attrs.define
class RunLock:
    """``run.lock`` held by this process; release with `release` (or use as a context)."""

    path: Path
    took_over: dict[str, Any] | None = None

    @classmethod
    def acquire(cls, path: Path) -> RunLock:
        """Create the lock file exclusively; take over a lock left by a dead process.

        Raises:
            TrainingError: another live process (or another host) holds the lock.
        """
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        took_over = None
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                try:
                    holder = json.loads(path.read_text() or "{}")
                except (OSError, ValueError):
                    holder = {}
                pid, host = holder.get("pid"), holder.get("host")
                if host == me["host"] and isinstance(pid, int) and not pid_alive(pid):
                    took_over = holder
                    path.unlink(missing_ok=True)
                    continue
                where = f"pid {pid} on {host}" if pid else "an unknown process"
                raise TrainingError(
                    f"{path.parent} is in use by {where} ({path.name}); wait for it to finish, "
                    f"or delete {path} if that process is gone"
                ) from None
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
                f.flush()
                os.fsync(f.fileno())
            return cls(path=path, took_over=took_over)
        raise TrainingError(f"could not take over {path}; delete it if no run is using {path.parent}")

    def release(self) -> None:
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def git_commit() -> str | None:
    """The commit of the flowkit source tree (``-dirty`` when it has changes), or None."""
    source = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=source, capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{commit}-dirty" if dirty else commit or None


@attrs.frozen
class Workspace:
    """Paths of one run directory and the writers of its small files."""

    root: Path

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def best(self) -> Path:
        return self.root / "best"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def config(self) -> Path:
        return self.root / "config.gin"

    @property
    def config_sources(self) -> Path:
        return self.root / "config_sources"

    @property
    def report(self) -> Path:
        return self.root / "report.md"

    @property
    def lock_path(self) -> Path:
        return self.root / "run.lock"

    def create(self) -> None:
        self.checkpoints.mkdir(parents=True, exist_ok=True)

    def check_layout(self) -> None:
        """Refuse a run directory whose entries are of the wrong kind (``checkpoints`` a file,
        ``metrics.jsonl`` a folder, ...): a run would fail on them part-way.

        Raises:
            ResumeError: naming the entry, what it should be, and the fix.
        """
        folders = (self.checkpoints, self.best, self.config_sources)
        files = (self.metrics, self.config, self.root / "heartbeat.json", self.root / "run_info.json",
                 self.root / "latent_stats.json", self.root / "data_rejections.jsonl")
        for path, folder in [*((p, True) for p in folders), *((p, False) for p in files)]:
            if path.exists() and path.is_dir() != folder:
                kind, should = ("a file", "a folder") if folder else ("a folder", "a file")
                raise ResumeError(f"{path} is {kind}, but a run keeps {should} there; move it aside (nothing of "
                                  "the run was changed), or give another --out")

    def lock(self) -> RunLock:
        """Take ``run.lock`` (see `RunLock.acquire`)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return RunLock.acquire(self.lock_path)

    def write_heartbeat(self, step: int, total_steps: int) -> None:
        atomic_write_json(
            self.root / "heartbeat.json",
            {"step": step, "total_steps": total_steps, "time": time.time(), "pid": os.getpid(),
             "host": socket.gethostname()},
        )

    def write_run_info(self, info: Mapping[str, Any], *, resumed_at: int | None) -> Path:
        """``run_info.json`` for a start, ``resume_info-<step>.json`` for a resume; a later
        resume from the same step (the one before was killed before its next checkpoint)
        writes ``resume_info-<step>.<k>.json``, k = 2, 3, ..., so none is lost."""
        name = "run_info.json" if resumed_at is None else f"resume_info-{resumed_at:08d}.json"
        k = 1
        while resumed_at is not None and (self.root / name).exists():
            k += 1
            name = f"resume_info-{resumed_at:08d}.{k}.json"
        atomic_write_json(self.root / name, dict(info))
        return self.root / name

    def write_rejections(self, rejections: Iterable[Mapping[str, Any]]) -> None:
        lines = [json.dumps(dict(r), sort_keys=True, ensure_ascii=False) for r in rejections]
        atomic_write_text(self.root / "data_rejections.jsonl", "".join(line + "\n" for line in lines))

    def write_latent_stats(self, stats: Mapping[str, Any]) -> None:
        atomic_write_json(self.root / "latent_stats.json", dict(stats))

    def write_config(self, text: str, sources: Sequence[Path]) -> None:
        """The resolved config and a copy of each source file (index-prefixed on a name clash)."""
        atomic_write_text(self.config, text)
        names = [p.name for p in sources]
        for i, source in enumerate(sources):
            name = source.name if names.count(source.name) == 1 else f"{i:02d}-{source.name}"
            atomic_write_text(self.config_sources / name, source.read_text(encoding="utf-8"))

    def write_report(self, markdown: str) -> None:
        atomic_write_text(self.report, markdown)
