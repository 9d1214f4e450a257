"""Launching sweep points: each point is the ordinary fixed command
``flowkit train CONFIG... -b ... --data ... --out SWEEP_DIR/<point>``.

That command continues its run from the newest valid checkpoint when it is run again
(README, "preempts jobs"), so every launcher only has to run it until the point is done:

- `LocalLauncher`: on this machine, one point after another or ``parallel`` at once,
  each with a thread budget of ``cores // parallel`` (``OMP_NUM_THREADS`` and
  ``MKL_NUM_THREADS``, which size torch's intra-op pool; a smaller ``OMP_NUM_THREADS``
  already set is kept). A point's process is told to stop (SIGTERM: it saves a checkpoint)
  when the sweep process dies, so a killed sweep leaves no orphan training.
- `SubmititLauncher`: submitit's ``AutoExecutor`` and ``map_array``: a SLURM job array
  (``cluster="slurm"``), or submitit's ``LocalExecutor`` (``cluster="local"``) that runs
  the same job files on this machine. On preemption or timeout submitit calls
  `PointRunner.checkpoint` in the job: it sends the training SIGTERM (checkpoint saved,
  exit 130) and requeues the same fixed command, which continues the run.

No scheduler of flowkit's own: the local launcher is a bounded loop of subprocesses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import ConfigError
from flowkit.processes import usable_cores

__all__ = ["LocalLauncher", "PointJob", "PointRunner", "SubmititLauncher", "thread_budget", "train_command"]

#: seconds a stopping training gets to write its checkpoint before it is killed
STOP_GRACE_S = 300.0


@attrs.frozen
class PointJob:
    """One point to run: its name, the command, and the log its output is appended to."""

    name: str
    command: tuple[str, ...]
    log: Path


def train_command(configs: Sequence[str], bindings: Sequence[str], data: Sequence[str], out: Path,
                  device: str = "auto") -> list[str]:
    """The fixed ``flowkit train`` command of one point (through this interpreter)."""
    cmd = [sys.executable, "-m", "flowkit", "train", *configs]
    for b in bindings:
        cmd += ["-b", b]
    for d in data:
        cmd += ["--data", d]
    return [*cmd, "--out", str(out), "--device", device]


def thread_budget(parallel: int, environ: Mapping[str, str] | None = None) -> int:
    """Threads per point: ``cores // parallel`` (at least 1), or a smaller ``OMP_NUM_THREADS``."""
    environ = os.environ if environ is None else environ
    budget = max(1, usable_cores() // max(1, parallel))
    try:
        given = int(environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        given = 0
    return min(budget, given) if given > 0 else budget


def _env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    if threads > 0:  # 0: leave the environment's (a SLURM job's, sized by its cpus_per_task)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _stop_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGTERM this process when the thread that started it dies (prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _start(job: PointJob, threads: int) -> subprocess.Popen[bytes]:
    job.log.parent.mkdir(parents=True, exist_ok=True)
    with open(job.log, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(job.command)}\n".encode())
        log.flush()
        return subprocess.Popen(
            list(job.command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(threads),
            preexec_fn=_stop_with_parent if sys.platform.startswith("linux") else None,
        )


OnStart = Callable[[PointJob], None]
OnEnd = Callable[[PointJob, int, float], None]


@attrs.define
class LocalLauncher:
    """Points on this machine, ``parallel`` at once, ``threads`` each (see the module docstring)."""

    parallel: int = 1
    threads: int = attrs.field(default=0)

    def __attrs_post_init__(self) -> None:
        if self.parallel < 1:
            raise ConfigError(f"--parallel {self.parallel}: give 1 or more points at once")
        if self.threads <= 0:
            self.threads = thread_budget(self.parallel)

    def describe(self) -> str:
        at_once = "one point at a time" if self.parallel == 1 else f"{self.parallel} points at once"
        return f"local launcher, {at_once}, {self.threads} thread(s) each ({usable_cores()} cores // {self.parallel})"

    def run(self, jobs: Sequence[PointJob], on_start: OnStart, on_end: OnEnd) -> bool:
        """Run ``jobs``; ``on_end(job, returncode, wall_s)`` after each. Returns False when
        stopped by SIGTERM or Ctrl-C (running points were told to save and stop)."""
        queue = list(jobs)
        live: dict[int, tuple[PointJob, subprocess.Popen[bytes], float]] = {}
        stopping = {"now": False}

        def stop(*_: Any) -> None:
            stopping["now"] = True
            for _, proc, _ in live.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)

        old = signal.signal(signal.SIGTERM, stop)
        try:
            while queue or live:
                while queue and len(live) < self.parallel and not stopping["now"]:
                    job = queue.pop(0)
                    on_start(job)
                    proc = _start(job, self.threads)
                    live[proc.pid] = (job, proc, time.monotonic())
                if not live:
                    break
                try:
                    time.sleep(0.2)
                except KeyboardInterrupt:  # the terminal sent SIGINT to the children too
                    stop()
                for pid, (job, proc, t0) in list(live.items()):
                    code = proc.poll()
                    if code is not None:
                        del live[pid]
                        on_end(job, code, time.monotonic() - t0)
        finally:
            signal.signal(signal.SIGTERM, old)
            for _, proc, _ in live.values():  # an error in a callback: stop the rest cleanly
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(timeout=STOP_GRACE_S)
        return not stopping["now"]


class PointRunner:
    """The function submitit runs in each job of the array: one point's fixed command.

    ``checkpoint`` is submitit's hook for preemption and timeout: the training is asked
    to save and stop (SIGTERM) and the same call is requeued, which continues the run.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._proc: subprocess.Popen[bytes] | None = None

    def __call__(self, command: Sequence[str], log: str) -> int:
        self._proc = _start(PointJob(Path(log).stem, tuple(command), Path(log)), self.threads)
        return self._proc.wait()

    def checkpoint(self, command: Sequence[str], log: str) -> Any:
        import submitit

        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
        return submitit.helpers.DelayedSubmission(PointRunner(self.threads), command, log)

    def __getstate__(self) -> dict[str, Any]:
        return {"threads": self.threads, "_proc": None}


@attrs.define
class SubmititLauncher:
    """A job array through submitit (``cluster``: "slurm", or "local" for its LocalExecutor).

    ``parameters`` go to ``executor.update_parameters`` (timeout_min, slurm_partition,
    gpus_per_node, cpus_per_task, mem_gb, slurm_additional_parameters, ...).
    """

    folder: Path
    cluster: str = "slurm"
    parallel: int = 1
    parameters: dict[str, Any] = attrs.field(factory=dict)
    wait: bool = True

    def describe(self) -> str:
        what = "SLURM job array" if self.cluster == "slurm" else "submitit LocalExecutor job array"
        return f"{what} through submitit, {self.parallel} at once (job files in {self.folder})"

    def _executor(self) -> Any:
        try:
            import submitit
        except ImportError:
            raise ConfigError("--launcher slurm needs submitit: pip install 'flowkit[sweep]'") from None
        try:
            executor = submitit.AutoExecutor(folder=str(self.folder), cluster=self.cluster)
        except (RuntimeError, ValueError) as exc:
            raise ConfigError(f"--launcher {self.cluster}: submitit cannot use it here ({exc}); run on a SLURM login "
                              "node, or use --launcher local") from None
        params = {"name": "flowkit-sweep", "timeout_min": 60 * 24, **self.parameters}
        if self.cluster == "slurm":
            params.setdefault("slurm_array_parallelism", self.parallel)
        try:
            executor.update_parameters(**params)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--launcher {self.cluster}: submitit refused the job parameters ({exc})") from None
        return executor

    def submit(self, jobs: Sequence[PointJob], threads: int) -> list[Any]:
        """Submit ``jobs`` as one array; returns submitit's jobs (in order)."""
        executor = self._executor()
        return executor.map_array(PointRunner(threads), [list(j.command) for j in jobs], [str(j.log) for j in jobs])

    def run(self, jobs: Sequence[PointJob], on_start: OnStart, on_end: OnEnd,
            on_submit: Callable[[PointJob, str], None] | None = None) -> bool:
        """Submit ``jobs`` (the local executor: ``parallel`` at a time) and, with ``wait``,
        wait for each; ``on_end`` gets the job's exit code (-1 when submitit reports a failure)."""
        threads = thread_budget(self.parallel) if self.cluster == "local" else int(
            self.parameters.get("cpus_per_task", 0) or 0)
        batch = self.parallel if self.cluster == "local" else len(jobs)
        for start in range(0, len(jobs), max(1, batch)):
            chunk = list(jobs[start:start + batch])
            t0 = time.monotonic()
            submitted = self.submit(chunk, threads)
            for job, handle in zip(chunk, submitted, strict=True):
                on_start(job)
                if on_submit is not None:
                    on_submit(job, str(handle.job_id))
            if not self.wait:
                continue
            for job, handle in zip(chunk, submitted, strict=True):
                try:
                    code = int(handle.result())
                except Exception:  # submitit's failed or uncompleted job: its log says why
                    code = -1
                on_end(job, code, time.monotonic() - t0)
        return True
