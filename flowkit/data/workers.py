"""Worker processes that never outlive their parent: the process pool prepare decodes with.

Spawned workers of a `concurrent.futures.ProcessPoolExecutor` hold both ends of its call
queue's pipe, so when the parent is killed (kill -9, the OOM killer) they never read EOF:
they block forever (about 250 MB each) and multiprocessing's resource tracker waits on
them. The standard library has no option against this, and Linux's parent-death signal
(``PR_SET_PDEATHSIG``) is not portable and fires when the *thread* that started the child
ends, so each worker here runs a watchdog thread that ends its process as soon as its
parent is gone (its parent pid changes).

Workers ignore SIGINT and SIGTERM: a Ctrl-C or a scheduler's SIGTERM to the whole process
group is the parent's to handle. `sigterm_as_interrupt` turns the parent's SIGTERM into a
`KeyboardInterrupt`, and `pool_map` kills its workers on any exception in the parent
(interrupt or error) before the exception goes on, so cleanup code runs and the command
exits with nothing left behind.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

#: seconds between a worker's checks that its parent is alive
WATCH_SECONDS = 0.2
#: exit status of a worker whose parent died
ORPHAN_EXIT = 70


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(WATCH_SECONDS)
        if os.getppid() != parent:  # re-parented: the parent is gone
            os._exit(ORPHAN_EXIT)


def _start_worker(parent: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="flowkit-watch-parent").start()
    if initializer is not None:
        initializer(*initargs)


def pool_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int, *,
             initializer: Callable[..., None] | None = None, initargs: tuple = (),
             chunksize: int = 4) -> Iterator[Any]:
    """``fn`` over ``items`` in ``workers`` spawned processes; results in input order.

    The workers exit when this process dies (watchdog) and are killed when this generator
    ends by an exception or is closed early.
    """
    ctx = multiprocessing.get_context("spawn")
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_start_worker,
                               initargs=(os.getpid(), initializer, initargs))
    try:
        yield from pool.map(fn, items, chunksize=chunksize)
    except BaseException:
        for child in multiprocessing.active_children():
            if child not in before:
                child.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises `KeyboardInterrupt` in the main thread (as Ctrl-C
    does), so ``finally`` and ``except`` blocks clean up; outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = ["ORPHAN_EXIT", "WATCH_SECONDS", "pool_map", "sigterm_as_interrupt"]
