"""`run_sweep`: points from the spec, every point's config checked, then launched until done.

The story of a sweep, top to bottom:

1. the points: the grid (or ``--random N`` draws from it), each repeated ``--seeds K``
   times; with ``--optuna TRIALS`` the points are asked of an Optuna study instead;
2. every point's config is parsed and built (`flowkit.sweep.check`): a bad binding is
   refused before any run starts;
3. ``sweep.json`` is opened: the same spec continues the sweep, another is refused;
   each point's state is read from its run directory (done, running, or to run);
4. the points to run are launched (`flowkit.sweep.launchers`), ``sweep.json`` rewritten
   after each change; the summary names the best point by the objective.

Re-running the same command skips done points and continues the others: each point is
the fixed ``flowkit train ... --out SWEEP_DIR/<point>`` command, which resumes its run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.data.locks import StoreLock
from flowkit.errors import ConfigError, TrainingError
from flowkit.io import check_out_path, check_writable, refused_writes
from flowkit.report.compare import OBJECTIVES, objective_value
from flowkit.sweep.check import check_points
from flowkit.sweep.grid import Point, grid_points, random_points, with_seeds
from flowkit.sweep.launchers import LocalLauncher, PointJob, SubmititLauncher, train_command
from flowkit.sweep.naming import point_names
from flowkit.sweep.state import LOCK_FILE, PointState, SweepSpec, SweepState, point_run_state

__all__ = ["SweepOutcome", "plan_points", "run_sweep"]

EXIT_INTERRUPTED = 130
OPTUNA_FILE = "optuna.db"

Say = Callable[[str], None]


@attrs.frozen
class SweepOutcome:
    """How a sweep call ended: the points by state and the best by the objective."""

    root: Path
    points: tuple[PointState, ...]
    best: PointState | None
    interrupted: bool = False
    submitted: bool = False


def plan_points(spec: SweepSpec) -> list[Point]:
    """The points of a grid sweep (not --optuna), in launch order."""
    if not spec.grid:
        points = [Point(())]
    elif spec.random is not None:
        points = random_points(spec.grid, spec.random, spec.seed)
    else:
        points = grid_points(spec.grid)
    return with_seeds(points, spec.seeds)


def _keys(spec: SweepSpec) -> list[str]:
    keys = [a.key for a in spec.grid]
    return keys + (["Trainer.seed"] if spec.seeds > 1 else [])


def _objective_of(root: Path, name: str, objective: str) -> float | None:
    from flowkit.report.rundir import NotARunError, read_run

    try:
        return objective_value(read_run(root / name), objective)
    except NotARunError:
        return None


#: SLURM job states in which a submitted point is still the scheduler's (not to be resubmitted)
_QUEUED = {"PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING", "REQUEUE_HOLD"}


def _job_alive(root: Path, job_id: str) -> bool:
    """Whether SLURM still holds ``job_id`` (asked through submitit, i.e. sacct); False
    where that cannot be asked (no SLURM here: a local job died with its sweep)."""
    try:
        import submitit

        return str(submitit.SlurmJob(folder=str(root / "submitit"), job_id=job_id).state).upper() in _QUEUED
    except Exception:  # no sacct, no submitit, an unknown job: nothing holds it
        return False


def _refresh(state: SweepState, *, keep_failed: bool = False) -> None:
    """Each point's state from its run directory (the truth), its objective when done; a
    point submitted to SLURM stays "submitted" while its job is queued or running. With
    ``keep_failed`` (after launching), a point whose attempt just failed stays "failed"
    whatever its directory holds: this call's outcome is that attempt's."""
    for p in state.points:
        if keep_failed and p.state == "failed":
            continue
        found = point_run_state(state.root / p.name)
        if found == "done":
            p.state = "done"
            p.objective = _objective_of(state.root, p.name, state.spec.objective)
        elif found == "running":
            p.state = "running"
        elif p.state == "submitted" and p.job_id and _job_alive(state.root, p.job_id):
            continue
        elif p.state in ("done", "running", "submitted"):  # its run directory went away or stopped
            p.state = "pending" if found == "pending" else "interrupted"


def _best(points: Sequence[PointState]) -> PointState | None:
    scored = [p for p in points if p.state == "done" and p.objective is not None]
    return min(scored, key=lambda p: p.objective) if scored else None  # type: ignore[arg-type,return-value]


class _Book:
    """Updates ``sweep.json`` as the launcher reports (one writer: this process)."""

    def __init__(self, state: SweepState, say: Say) -> None:
        self.state, self.say = state, say

    def start(self, job: PointJob) -> None:
        p = self.state.by_name()[job.name]
        p.state, p.attempts, p.returncode = "running", p.attempts + 1, None
        self.state.save()
        self.say(f"point {job.name}: started (attempt {p.attempts}; log {job.log})")

    def submitted(self, job: PointJob, job_id: str) -> None:
        p = self.state.by_name()[job.name]
        p.state, p.job_id = "submitted", job_id
        self.state.save()

    def end(self, job: PointJob, code: int, wall_s: float) -> None:
        p = self.state.by_name()[job.name]
        p.wall_s = round(p.wall_s + wall_s, 3)
        p.returncode = code
        found = point_run_state(self.state.root / job.name)
        if code == 0 and found == "done":
            p.state = "done"
            p.objective = _objective_of(self.state.root, job.name, self.state.spec.objective)
            score = "" if p.objective is None else f", {self.state.spec.objective} {p.objective:.5g}"
            self.say(f"point {job.name}: done in {wall_s:.0f} s{score}")
        elif code == EXIT_INTERRUPTED:
            p.state = "interrupted"
            self.say(f"point {job.name}: stopped with its checkpoint saved; run the same command to continue")
        else:
            p.state = "failed"
            why = f"exit {code}" if code != 0 else "exit 0, but no checkpoint of its last step was committed"
            self.say(f"point {job.name}: failed ({why}); see {job.log}")
        self.state.save()


def _launcher(kind: str, root: Path, parallel: int, slurm: dict[str, Any], wait: bool) -> Any:
    if kind == "local":
        return LocalLauncher(parallel)
    if kind in ("slurm", "submitit-local"):
        cluster = "slurm" if kind == "slurm" else "local"
        return SubmititLauncher(root / "submitit", cluster=cluster, parallel=parallel, parameters=dict(slurm),
                                wait=wait or cluster == "local")
    raise ConfigError(f"--launcher {kind!r} is not known; use local, slurm or submitit-local")


def _jobs(state: SweepState, names: Sequence[str], device: str) -> list[PointJob]:
    spec = state.spec
    out = []
    for name in names:
        p = state.by_name()[name]
        cmd = train_command(spec.configs, [*spec.bindings, *p.bindings], spec.data, state.root / name, device)
        out.append(PointJob(name, tuple(cmd), state.root / "logs" / f"{name}.log"))
    return out


def _finish(state: SweepState, interrupted: bool, submitted: bool, say: Say) -> SweepOutcome:
    best = _best(state.points)
    counts: dict[str, int] = {}
    for p in state.points:
        counts[p.state] = counts.get(p.state, 0) + 1
    say(f"sweep {state.root}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    if best is not None:
        say(f"best by {state.spec.objective}: {best.name} ({best.objective:.5g})")
    say(f"compare the points: flowkit report {state.root}")
    failed = [p for p in state.points if p.state == "failed"]
    if failed and not interrupted:
        first = failed[0]
        raise TrainingError(
            f"{len(failed)} of {len(state.points)} sweep points failed, first {first.name} (exit {first.returncode}); "
            f"see {state.root / 'logs' / (first.name + '.log')}, fix it and run the same command again"
        )
    return SweepOutcome(state.root, tuple(state.points), best, interrupted=interrupted, submitted=submitted)


def run_sweep(spec: SweepSpec, root: Path, *, launcher: str = "local", parallel: int = 1, device: str = "auto",
              slurm: dict[str, Any] | None = None, wait: bool = False, say: Say = print) -> SweepOutcome:
    """Run (or continue) the sweep ``spec`` in ``root`` (see the module docstring).

    Args:
        spec: what the sweep is (configs, bindings, data, grid, draws, objective).
        root: the sweep directory.
        launcher: "local", "slurm" or "submitit-local".
        parallel: points at once (local), the array's parallelism (slurm).
        device: ``--device`` of every point's ``flowkit train``.
        slurm: submitit parameters for the slurm launchers (timeout_min, slurm_partition, ...).
        wait: slurm: wait for the jobs (default: return once they are submitted).
        say: where progress lines go.

    Raises:
        ConfigError: a bad --grid or binding (before any run starts), another sweep in
            ``root``, an unknown launcher or objective.
        TrainingError: some points failed (the others ran; the same command retries them).
    """
    if spec.objective not in OBJECTIVES:
        raise ConfigError(f"--objective {spec.objective!r} is not known; use one of: {', '.join(OBJECTIVES)}")
    check_out_path(root, label=f"--out {root}", folder=True)  # a file in the way, a read-only or full disk:
    check_writable(root, label=f"--out {root}")  # refused before any config is built
    if spec.optuna is not None:
        return _run_optuna(spec, root, launcher=launcher, parallel=parallel, device=device, say=say)
    run = _launcher(launcher, root, parallel, slurm or {}, wait)  # an unknown launcher: refused before anything
    points = plan_points(spec)
    names = point_names(points, _keys(spec))
    SweepState.open(root, spec, names)  # another sweep in root: refused before anything is parsed
    check_points(spec.configs, spec.bindings, points, spec.data, needs_probe=spec.objective == "probe_wer")
    with _sweep_lock(root):
        state = SweepState.open(root, spec, names)  # read again under the lock
        with refused_writes(f"--out {root}", root):  # sweep.json on a disk that filled up: one line
            return _run_grid(state, names, points, run, device, say)


def _sweep_lock(root: Path) -> StoreLock:
    """Hold ``SWEEP_DIR/sweep.lock``: a second sweep process in ``root`` is refused naming
    this one's pid (two would launch the same points and record each other's as failed)."""
    with refused_writes(f"--out {root}", root):
        root.mkdir(parents=True, exist_ok=True)
    return StoreLock.acquire(root / LOCK_FILE.removesuffix(".lock"), what=f"sweep {root}",
                             retry="or give another --out", command="sweep")


def _run_grid(state: SweepState, names: Sequence[str], points: Sequence[Point], run: Any, device: str,
              say: Say) -> SweepOutcome:
    root = state.root
    for name, point in zip(names, points, strict=True):
        state.add(name, point)
    _refresh(state)
    state.save()
    book = _Book(state, say)
    todo = [p.name for p in state.points if p.state not in ("done", "running", "submitted")]
    busy = [p.name for p in state.points if p.state in ("running", "submitted")]
    say(f"sweep {root}: {len(state.points)} points, {len(state.points) - len(todo) - len(busy)} done, "
        f"{len(busy)} running elsewhere (or queued), {len(todo)} to run; {run.describe()}")
    submitted = False
    if isinstance(run, SubmititLauncher):
        finished = run.run(_jobs(state, todo, device), book.start, book.end, on_submit=book.submitted)
        submitted = not run.wait and bool(todo)
        if submitted:
            ids = sorted({p.job_id.split("_")[0] for p in state.points if p.job_id})
            say(f"submitted {len(todo)} points as job array {', '.join(ids)}; watch with squeue, "
                "run the same command again to see the state and resubmit unfinished points")
    else:
        finished = run.run(_jobs(state, todo, device), book.start, book.end)
    _refresh(state, keep_failed=True)
    state.save()
    return _finish(state, not finished, submitted, say)


# ---- Optuna ------------------------------------------------------------------------


def _study(root: Path, spec: SweepSpec, number: int) -> Any:
    """The study in ``root/optuna.db`` with a sampler seeded by the trial about to be asked
    (``seed + number``), so a study resumed after a kill draws what an uninterrupted one draws."""
    try:
        import optuna
    except ImportError:
        raise ConfigError("--optuna needs optuna: pip install 'flowkit[sweep]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{(root / OPTUNA_FILE).resolve()}"
    sampler = optuna.samplers.TPESampler(seed=spec.seed + number)
    return optuna.create_study(study_name="flowkit-sweep", storage=storage, sampler=sampler, direction="minimize",
                               load_if_exists=True)


def _run_optuna(spec: SweepSpec, root: Path, *, launcher: str, parallel: int, device: str, say: Say) -> SweepOutcome:
    """Ask, train, tell, one trial after another until ``spec.optuna`` trials are finished.

    A trial left RUNNING by a killed sweep is finished first: its point's fixed command
    continues the run, and its value is told to the study under its own number.
    """
    try:
        import optuna  # noqa: F401 - a missing optuna is refused before any work
    except ImportError:
        raise ConfigError("--optuna needs optuna: pip install 'flowkit[sweep]'") from None
    if launcher != "local" or parallel != 1:
        raise ConfigError("--optuna runs its trials one after another with the local launcher; "
                          "drop --launcher/--parallel")
    if not spec.grid:
        raise ConfigError("--optuna needs a search space: give --grid KEY=[VALUES] for each binding to search")
    if spec.seeds > 1 or spec.random is not None:
        raise ConfigError("--optuna chooses the points itself: drop --seeds and --random "
                          "(sweep seeds with --grid Trainer.seed=[...])")
    every = with_seeds(grid_points(spec.grid), spec.seeds)
    names = dict(zip((p.bindings for p in every), point_names(every, _keys(spec)), strict=True))
    SweepState.open(root, spec, list(names.values()))
    check_points(spec.configs, spec.bindings, every, spec.data, needs_probe=spec.objective == "probe_wer")
    with _sweep_lock(root):
        state = SweepState.open(root, spec, list(names.values()))
        with refused_writes(f"--out {root}", root):  # sweep.json on a disk that filled up: one line
            return _optuna_trials(state, spec, names, device=device, say=say)


def _optuna_trials(state: SweepState, spec: SweepSpec, names: dict[Any, str], *, device: str, say: Say) -> SweepOutcome:
    import optuna

    root = state.root
    _refresh(state)  # points a previous call left failed or running, from their directories
    state.save()
    local = LocalLauncher(1)
    book = _Book(state, say)
    say(f"sweep {root}: Optuna study of {spec.optuna} trials ({root / OPTUNA_FILE}), objective {spec.objective}; "
        f"{local.describe()}")
    distributions = {a.key: optuna.distributions.CategoricalDistribution(list(a.values)) for a in spec.grid}
    interrupted = False
    while True:
        study = _study(root, spec, 0)
        trials = study.get_trials(deepcopy=False)
        stale = [t for t in trials if t.state == optuna.trial.TrialState.RUNNING]
        finished = [t for t in trials if t.state.is_finished()]
        if stale:
            number, params = stale[0].number, stale[0].params
        elif len(finished) >= spec.optuna:
            break
        else:
            study = _study(root, spec, len(trials))
            trial = study.ask(distributions)
            number, params = trial.number, trial.params
        bindings = tuple((a.key, params[a.key]) for a in spec.grid)
        point = Point(bindings)
        name = names[point.bindings]
        entry = state.add(name, point, trial=number)
        entry.trial = number
        if point_run_state(root / name) != "done":
            if not local.run(_jobs(state, [name], device), book.start, book.end):
                interrupted = True
                break
        _refresh(state, keep_failed=True)
        value = _objective_of(root, name, spec.objective) if entry.state == "done" else None
        if value is None:
            why = "failed" if entry.state != "done" else f"logged no {spec.objective}"
            say(f"trial {number}: point {name} {why}")
            study.tell(number, state=optuna.trial.TrialState.FAIL)
        else:
            entry.objective = value
            say(f"trial {number}: {name} -> {spec.objective} {value:.5g}")
            study.tell(number, value)
        state.save()
    _refresh(state, keep_failed=True)
    state.save()
    return _finish(state, interrupted, False, say)

