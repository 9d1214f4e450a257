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

Starting the workers is the one moment an interrupt must wait: raised while the main thread
is inside ``Process.start()`` (the child forked, its pickled start-up data not yet written
to its pipe, the child not yet in ``multiprocessing.active_children()``), it left a child
that nobody killed; the child then read EOF in multiprocessing's spawn bootstrap and printed
an ``EOFError: Ran out of input`` traceback after the parent's "error: interrupted" (seen
under load, where the test's SIGTERM often lands right as the second worker forks). So
`pool_map` starts its workers with SIGINT and SIGTERM held (`_signals_held`): a signal that
arrives then is delivered once every worker is started and known, and the workers, which
inherit the blocked signal mask, never see a group-wide Ctrl-C before they ignore it (the
standard library's resource tracker starts its process the same way).
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
from multiprocessing import resource_tracker
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


#: the signals a worker ignores and `pool_map` holds while it starts the workers
_HELD = (signal.SIGINT, signal.SIGTERM)


def _start_worker(parent: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    for signum in _HELD:
        signal.signal(signum, signal.SIG_IGN)  # also drops one that came while they were blocked
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)  # blocked since the parent forked us
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="flowkit-watch-parent").start()
    if initializer is not None:
        initializer(*initargs)


def pool_map(fn: Callable[[Any], Any], items: Iterable[Any], workers: int, *,
             initializer: Callable[..., None] | None = None, initargs: tuple = (),
             chunksize: int = 4) -> Iterator[Any]:
    """``fn`` over ``items`` in ``workers`` spawned processes; results in input order.

    The workers exit when this process dies (watchdog) and are killed when this generator
    ends by an exception or is closed early. A SIGINT or SIGTERM that arrives while the
    workers start is delivered (to this process's handler) once they have all started.
    """
    ctx = multiprocessing.get_context("spawn")
    before = set(multiprocessing.active_children())
    pool = None
    try:
        # started first: starting it unblocks SIGINT and SIGTERM in this thread, which would end
        # the hold below for the workers
        resource_tracker.ensure_running()
        # the executor spawns its workers in the submits of map (all made before it returns);
        # held signals come after, when each worker is in active_children (module docstring)
        with _signals_held():
            pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_start_worker,
                                       initargs=(os.getpid(), initializer, initargs))
            results = pool.map(fn, items, chunksize=chunksize)
        yield from results
    except BaseException:
        with _signals_held():  # a second Ctrl-C does not cut the cleanup short
            for child in multiprocessing.active_children():
                if child not in before:
                    child.kill()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive within the block are delivered when it ends.

    The calling thread blocks them (children it starts inherit the mask); in the main thread
    their Python handlers are also swapped for ones that only note the signal, since the
    kernel may hand a process-directed signal to another thread, whose C handler still has the
    main thread run the Python one.
    """
    noted: list[int] = []
    swapped: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in _HELD:
            handler = signal.getsignal(signum)
            if handler is not None and handler is not signal.SIG_IGN:  # None: set outside Python
                swapped[signum] = signal.signal(signum, lambda s, f: noted.append(s))
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        for signum, handler in swapped.items():
            signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)  # a pending one reaches its own handler
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


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
