"""Processes of this host: whether the one named in a lock file still lives, and how many
cores this one may use.

A run's ``run.lock`` names the pid of the process training there; `pid_alive` is the one
answer both the trainer (taking over a dead process's lock) and ``flowkit report`` /
sweeps (is this run in progress?) use. A process that has exited but was not yet reaped by
its parent (a zombie: a ``kill -9`` of a process group whose parent died with it, inside a
container whose init does not reap) still answers signal 0, yet it holds nothing: on
Linux its ``/proc/<pid>/stat`` state ``Z`` (or ``X``) counts it as dead.

`usable_cores` is the one count of cores behind every default that sizes itself to the
machine (build workers, sweep threads, Whisper's and DNSMOS's threads in an eval).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["pid_alive", "usable_cores"]


def _exited(pid: int) -> bool:
    """Whether ``pid`` is a zombie or dead task (Linux ``/proc``; False where there is none)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # "pid (comm) S ...": the command name may hold spaces and parentheses, the state follows the last ")"
    state = stat[stat.rfind(")") + 2 :][:1]
    return state in ("Z", "X")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie does not; another user's does).
    A pid below 1 (a damaged lock: ``kill`` would address a process group) names none."""
    if pid < 1:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return not _exited(pid)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity on Linux, else the machine's; at least 1)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1
