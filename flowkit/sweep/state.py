"""``sweep.json``: what a sweep is (its spec) and where each point stands.

Layout of a sweep directory::

    SWEEP_DIR/sweep.json        the spec, the points, their bindings and state
    SWEEP_DIR/sweep.lock        pid of the sweep process running it (a second is refused)
    SWEEP_DIR/<point name>/     one ordinary run directory per point (flowkit train --out)
    SWEEP_DIR/logs/<name>.log   each point's output, appended on every attempt
    SWEEP_DIR/submitit/         submitit's job files (slurm, submitit-local launchers)
    SWEEP_DIR/optuna.db         the Optuna study (--optuna)

The run directories are the truth: a point is done when its run reached its steps
(`flowkit.report.rundir.RunDir.state` "completed") and its checkpoint of the last step
was committed (a run that logged its last step but could not save, on a full disk, is
run again), running while a live process holds
its run lock, and otherwise to be (re)started; ``sweep.json`` is rewritten atomically by
the one sweep process after every change of a point, for people and for
``flowkit report SWEEP_DIR``. The spec decides whether a re-run is the same sweep: the
same configs, bindings, data, grid, draw and objective continue it; anything else is
refused, naming the first difference.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import ConfigError, DataError
from flowkit.io import atomic_write_text
from flowkit.sweep.grid import Axis, Point

__all__ = ["LOCK_FILE", "SWEEP_FILE", "PointState", "SweepSpec", "SweepState", "point_run_state"]

SWEEP_FILE = "sweep.json"
#: held by the one sweep process writing the directory (`flowkit.data.locks.StoreLock`)
LOCK_FILE = "sweep.lock"
VERSION = 1


@attrs.frozen
class SweepSpec:
    """The options that define a sweep (launcher options are not part of it)."""

    configs: tuple[str, ...]
    bindings: tuple[str, ...]
    data: tuple[str, ...]
    grid: tuple[Axis, ...]
    random: int | None = None
    seed: int = 0
    seeds: int = 1
    optuna: int | None = None
    objective: str = "val_loss_ema"

    def to_json(self) -> dict[str, Any]:
        return {
            "configs": list(self.configs), "bindings": list(self.bindings), "data": list(self.data),
            "grid": {a.key: list(a.values) for a in self.grid}, "random": self.random, "seed": self.seed,
            "seeds": self.seeds, "optuna": self.optuna, "objective": self.objective,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SweepSpec:
        return cls(
            configs=tuple(doc.get("configs", ())), bindings=tuple(doc.get("bindings", ())),
            data=tuple(doc.get("data", ())),
            grid=tuple(Axis(k, tuple(v)) for k, v in (doc.get("grid") or {}).items()),
            random=doc.get("random"), seed=int(doc.get("seed", 0)), seeds=int(doc.get("seeds", 1)),
            optuna=doc.get("optuna"), objective=str(doc.get("objective", "val_loss_ema")),
        )

    def first_difference(self, other: SweepSpec) -> str | None:
        """``"grid Trainer.lr: [1e-3, 2e-3] -> [1e-3]"`` for the first field that differs, or None."""
        mine, theirs = self.to_json(), other.to_json()
        for field in mine:
            if mine[field] == theirs[field]:
                continue
            if field == "grid":
                for key in dict.fromkeys([*mine["grid"], *theirs["grid"]]):
                    a, b = mine["grid"].get(key), theirs["grid"].get(key)
                    if a != b:
                        return f"grid {key}: {_show(a)} -> {_show(b)}"
                return "grid: the order of the --grid options"
            return f"{field}: {_show(mine[field])} -> {_show(theirs[field])}"
        return None


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


@attrs.define
class PointState:
    """One point in ``sweep.json``.

    ``state``: "pending" (not started), "running", "done", "failed" (its last attempt
    exited non-zero: ``returncode`` and the log say why), "submitted" (a scheduler job
    holds it), "interrupted" (stopped by a signal, checkpoint saved).
    """

    name: str
    bindings: list[str]
    state: str = "pending"
    attempts: int = 0
    wall_s: float = 0.0
    returncode: int | None = None
    job_id: str | None = None
    trial: int | None = None
    objective: float | None = None

    def point(self) -> Point:
        pairs = []
        for line in self.bindings:
            key, _, value = line.partition(" = ")
            pairs.append((key, value))
        return Point(tuple(pairs))


def point_run_state(run_dir: Path) -> str:
    """"done" (its steps reached and the checkpoint of the last step committed), "running",
    "started" (a run that stopped before its steps, or without that checkpoint) or
    "pending" (no run yet), read from the run directory itself."""
    from flowkit.report.rundir import NotARunError, read_run

    if not run_dir.is_dir():
        return "pending"
    try:
        run = read_run(run_dir)
    except NotARunError:
        return "pending"
    state = run.state
    if state == "completed":
        latest, total = run.latest_checkpoint, run.total_steps
        if latest is not None and (total is None or latest.step >= total):
            return "done"
        return "started"  # the last step logged, its checkpoint never committed: the run is not done
    if state == "in progress":
        return "running"
    return "started"


@attrs.define
class SweepState:
    """``sweep.json`` in memory; `save` writes it atomically."""

    root: Path
    spec: SweepSpec
    points: list[PointState]
    created: float = attrs.field(factory=time.time)

    @property
    def path(self) -> Path:
        return self.root / SWEEP_FILE

    def by_name(self) -> dict[str, PointState]:
        return {p.name: p for p in self.points}

    def add(self, name: str, point: Point, trial: int | None = None) -> PointState:
        """The point called ``name``, added when new."""
        existing = self.by_name().get(name)
        if existing is not None:
            return existing
        entry = PointState(name=name, bindings=point.lines, trial=trial)
        self.points.append(entry)
        return entry

    def save(self) -> None:
        doc = {
            "version": VERSION, "created": self.created, "updated": time.time(), "spec": self.spec.to_json(),
            "points": [attrs.asdict(p) | {"dir": p.name} for p in self.points],
        }
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")

    @classmethod
    def open(cls, root: Path, spec: SweepSpec, names: Sequence[str] = ()) -> SweepState:
        """The sweep in ``root``: a new one, or the one there when its spec is ``spec``.

        Without ``sweep.json`` (deleted after it was damaged), a folder that holds only
        point directories of this spec (``names``), ``logs/`` and the lock is taken as this
        sweep: its state is rebuilt from the run directories, the truth about each point
        (each point's ``flowkit train`` refuses a run directory of another config).

        Raises:
            ConfigError: ``root`` holds a sweep of another spec (naming the first difference),
                or is a non-empty directory that holds no sweep.
            DataError: an unreadable ``sweep.json`` (the message says how to rebuild it).
        """
        path = root / SWEEP_FILE
        if not path.is_file():
            folders, files = {"logs", "submitit", *names}, {LOCK_FILE, "optuna.db"}
            if root.is_dir() and any(p.name not in (folders if p.is_dir() else files) for p in root.iterdir()):
                raise ConfigError(
                    f"--out {root} is a directory that holds no sweep ({SWEEP_FILE} is missing); "
                    "give a new or empty directory"
                )
            return cls(root, spec, [])
        doc = read_sweep_file(path)
        old = SweepSpec.from_json(doc.get("spec") or {})
        diff = old.first_difference(spec)
        if diff is not None:
            raise ConfigError(
                f"--out {root} holds another sweep ({diff}); repeat the command that made it to continue it, "
                "or give a new --out"
            )
        known = {f.name for f in attrs.fields(PointState)}
        points = [PointState(**{k: v for k, v in p.items() if k in known}) for p in doc.get("points", [])]
        return cls(root, spec, points, created=float(doc.get("created", time.time())))


def read_sweep_file(path: Path) -> dict[str, Any]:
    """``sweep.json`` as a dict.

    Raises:
        DataError: it cannot be read or is not a sweep file.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot be read as JSON ({type(exc).__name__}); it is written only by flowkit sweep, "
                        f"so it was damaged elsewhere: delete it and run the same command again (the sweep's state is "
                        "rebuilt from its points' run directories)") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("points"), list):
        raise DataError(f"{path}: not a flowkit sweep file (no 'points' list)")
    return doc
