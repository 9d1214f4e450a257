"""One writer per store: the lock `flowkit prepare` holds while it writes a store or a shard.

``<store>.lock`` sits beside the store (``corpus.zarr.lock``, ``shard-00000-of-00004.zarr.lock``)
and holds the writer's pid, host and start time. The lock itself is an ``flock(2)`` on that
file, so the kernel lets go of it however the writer ends (``kill -9`` included): a lock
file left by a dead prepare holds no lock and the next prepare takes it over, with no
pid guessing. A second writer is refused at once, in one line naming the first one's pid;
the writer removes the file when it is done.

On a filesystem without ``flock`` (some network and FUSE mounts; ``fcntl`` missing on
Windows) prepare runs without the lock, as before it existed: there, do not start two
prepares of one store.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import DataError

__all__ = ["LOCK_SUFFIX", "StoreLock", "lock_path"]

LOCK_SUFFIX = ".lock"


def lock_path(store: Path) -> Path:
    """``<store>.lock``: the lock file of the writer of ``store``."""
    return store.with_name(store.name + LOCK_SUFFIX)


def _holder(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 4096).decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict[str, Any], command: str) -> str:
    pid, host, since = holder.get("pid"), holder.get("host"), holder.get("since")
    if not isinstance(pid, int):
        return f"another flowkit {command} (it has not written its pid yet)"
    where = f" on {host}" if host and host != socket.gethostname() else ""
    when = f", started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}" \
        if isinstance(since, (int, float)) and since > 0 else ""
    return f"pid {pid}{where}{when}"


@attrs.define
class StoreLock:
    """The held lock of one store's writer; `release` (or the ``with`` block's end) lets go."""

    path: Path
    fd: int | None  # None: the filesystem has no flock, nothing is held

    @classmethod
    def acquire(cls, store: Path, what: str, retry: str, *, command: str = "prepare") -> StoreLock:
        """Lock ``<store>.lock`` for this process, or refuse.

        Args:
            store: the store (or shard store) about to be written; its folder must exist.
                Other commands with one writer per folder lock the same way (``flowkit
                sweep``: ``SWEEP_DIR/sweep.lock``; ``flowkit eval``: ``OUT/eval.lock``).
            what: the store as the message names it, e.g. ``"shard 0/2 of data/shards"``.
            retry: the way out the message offers, e.g. ``"or give another --out"``.
            command: the flowkit command that writes it, as the message names it.

        Raises:
            DataError: another live process holds the lock (the message names its pid), or
                the lock file cannot be created there.
        """
        try:
            import fcntl
        except ImportError:  # Windows
            return cls(lock_path(store), None)
        path = lock_path(store)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        for _ in range(10):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise DataError(f"{path}: cannot create the lock file of {command} ({exc.strerror}); "
                                "--out must be in a folder you can write") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise DataError(f"{what} is being written by {_describe(holder, command)} ({path.name}); "
                                f"wait for it to finish, {retry}") from None
            except OSError:  # no flock on this filesystem: run unlocked, as before
                os.close(fd)
                return cls(path, None)
            # a writer that let go between our open and our flock unlinked the file we opened
            try:
                current = os.stat(path).st_ino
            except FileNotFoundError:
                current = None
            if current != os.fstat(fd).st_ino:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(me).encode("utf-8"))
            os.fsync(fd)
            return cls(path, fd)
        raise DataError(f"{path}: could not take the lock of {command} (other writers keep replacing it); "
                        f"{retry.removeprefix('or ')}")

    def release(self) -> None:
        """Remove the lock file, then let go (a waiter that opened the old file sees it is gone)."""
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> StoreLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
