"""Building the next steps' micro-batches while the current step trains.

A step on a GPU takes tens of milliseconds; building its batches (pairing, reads from the
store, collation) takes a few milliseconds on the CPU, and now and then much longer when
other processes hold the cores. `StepPrefetcher` runs the builds in one background thread
that stays up to ``depth`` steps ahead of training, so the training thread only waits when
the builds fall behind by more than that (a single slow build is absorbed by the steps
already built). A thread, not a worker process: the build spends much of its time in numpy
copies, torch conversions and file reads, which release the GIL; a process would have to
pickle every batch back (and reopen the zarr stores, see the design notes on forking after
zarr), which measured slower on 2 cores. One thread, not several: the builds of successive
steps share the data stream, so they run one after another, in step order. Starting the
thread also keeps freed host memory in the process (`flowkit.batching.host_memory`): a
build whose padded arrays had to be faulted in afresh was what stalled the steps.

Bit-identical resume still holds. The batches are built by the same code, in the same
order, from the same sampler position and data stream as without prefetching -- only
earlier. The thread owns the sampler and the data stream while it runs; each build
returns, with its batches, a *snapshot* of both taken right after it. A checkpoint
records the snapshot of the last step actually consumed, so batches that were prefetched
but not consumed (the run stopped, or was killed mid-build) leave no trace: a resume
starts from the state just after the consumed step and builds those batches again.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

from flowkit.batching.host_memory import keep_freed_memory

__all__ = ["Prefetched", "StepPrefetcher"]

T = TypeVar("T")


@attrs.frozen
class Prefetched(Generic[T]):
    """One step's product and the data-state snapshot taken right after building it."""

    value: T
    state: Any


class StepPrefetcher(Generic[T]):
    """Calls ``build()`` up to ``depth`` steps ahead in a background thread (or inline when
    disabled).

    ``build`` makes one step's micro-batches; ``snapshot`` captures the state that build
    advanced (sampler position, data stream), called in the same thread right after it.
    Exceptions raised by ``build`` are re-raised by `get` in the caller's thread, at the
    step whose build raised (the steps built before it are handed out first).

    Raises:
        ValueError: ``depth < 1``.
    """

    def __init__(self, build: Callable[[], T], snapshot: Callable[[], Any], *, enabled: bool = True,
                 depth: int = 2) -> None:
        if depth < 1:
            raise ValueError(f"StepPrefetcher: depth = {depth} must be >= 1")
        self._build = build
        self._snapshot = snapshot
        self.enabled = enabled
        self.depth = depth
        self._results: queue.Queue[tuple[bool, Any]] = queue.Queue()
        self._slots = threading.Semaphore(depth)  # builds the thread may start before one is consumed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._started = 0  # builds started by the thread and not consumed yet

    def _make(self) -> Prefetched[T]:
        value = self._build()
        return Prefetched(value, self._snapshot())

    def _work(self) -> None:
        while True:
            self._slots.acquire()
            if self._stop.is_set():
                return
            with self._lock:
                self._started += 1
            try:
                self._results.put((True, self._make()))
            except BaseException as exc:  # handed to the training thread, raised there
                self._results.put((False, exc))
                return

    def _start(self) -> None:
        keep_freed_memory()  # the builds reuse freed memory instead of faulting fresh pages in
        self._stop = threading.Event()
        self._slots = threading.Semaphore(self.depth)
        self._started = 0
        self._thread = threading.Thread(target=self._work, name="flowkit-prefetch", daemon=True)
        self._thread.start()

    def get(self) -> Prefetched[T]:
        """This step's micro-batches (waiting for the build if it is not done); the thread
        goes on building the steps after it.

        Raises:
            Exception: whatever ``build`` raised (a bad item, a read error).
        """
        if not self.enabled:
            return self._make()
        if self._thread is None:
            self._start()
        ok, result = self._results.get()
        with self._lock:
            self._started -= 1
        if not ok:
            assert self._thread is not None
            self._thread.join()  # it returned after putting the exception
            self._thread = None
            raise result
        self._slots.release()
        return result

    @property
    def in_flight(self) -> bool:
        """A build was started (or finished) ahead and its result is not consumed yet."""
        with self._lock:
            return self._thread is not None and self._started > 0

    def close(self) -> None:
        """Stop the thread after the build in flight and drop every unconsumed result (the
        sampler and data stream stay advanced by them: only a snapshot from `get` may be
        saved afterwards)."""
        if self._thread is not None:
            self._stop.set()
            self._slots.release()  # wake the thread if it waits for a free slot
            self._thread.join()
            self._thread = None
            while not self._results.empty():
                self._results.get_nowait()
            self._started = 0
