"""Building the next steps' micro-batches while the current step trains, in several workers.

A step on a GPU takes tens of milliseconds; building its batches (pairing, reads from the
store, collation) takes several milliseconds on the CPU -- can be longer than the step it
must hide behind (docs/performance.md, "Batch building") -- and now and then much longer
when other processes hold the cores. `StepPrefetcher` keeps up to ``ahead`` steps in
flight (``max(depth, workers)``), so the training thread only waits when the builds fall
behind by more than that, and builds up to ``workers`` of them at once.

A build has two halves (`flowkit.batching.builder`): the *plan* makes every random draw
of the step (the batch sampler's next batches, the pairing and CFG-dropout draws from the
data stream), the *assembly* reads the latents and collates, drawing nothing. Plans are
made by one thread, one step after another in step order, exactly as a single-threaded
build makes them; only the assemblies run in parallel. So the batches, their order and
every draw are those of one thread whatever the number of workers and whichever assembly
finishes first: `get` hands out the steps in the order they were planned, waiting for a
slow one while later ones are done.

Threads, not processes: the assembly spends most of its time in the reads (``preadv``) and
numpy copies over whole arrays, which release the GIL; a process would have to pickle
every batch back (float16 latents: 6 MB for an e13 batch) and reopen the zarr stores (see
the design notes on forking after zarr). Measured: docs/performance.md, "Batch building".
Starting the workers also keeps freed host memory in the process
(`flowkit.batching.host_memory`): a build whose padded arrays had to be faulted in afresh
was what stalled the steps.

Bit-identical resume still holds. Each plan returns, with its step, a *snapshot* of the
sampler position and the data stream taken right after it. A checkpoint records the
snapshot of the last step actually consumed, so steps that were planned or assembled but
not consumed (the run stopped, or was killed mid-build) leave no trace: a resume starts
from the state just after the consumed step and plans those steps again.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

import attrs

from flowkit.processes import usable_cores

__all__ = ["MAX_DEFAULT_WORKERS", "Prefetched", "StepPrefetcher", "default_batch_workers"]

T = TypeVar("T")

#: the default number of build workers stops here: beyond it a GPU host's cores serve the
#: training process itself (data-loader threads of other ranks, the CUDA launch thread).
MAX_DEFAULT_WORKERS = 8


def default_batch_workers() -> int:
    """Build workers when ``Trainer.batch_workers`` is None: the cores this process may run
    on (its CPU affinity, e.g. a container's or a ``taskset``'s) less one, at least 1 and at
    most `MAX_DEFAULT_WORKERS`.

    One core is left to the training thread: on a GPU host it launches the kernels, on a CPU
    it computes the step: on two cores a second build worker fights the training thread and
    the other worker for the GIL and the cores (docs/performance.md, "Batch building")."""
    return max(1, min(MAX_DEFAULT_WORKERS, usable_cores() - 1))


@attrs.frozen
class Prefetched(Generic[T]):
    """One step's product and the data-state snapshot taken right after planning it."""

    value: T
    state: Any


# what a planned step's slot in the ready queue holds
_VALUE, _FUTURE, _ERROR = "value", "future", "error"


class StepPrefetcher(Generic[T]):
    """Plans steps in order in a background thread and assembles up to ``workers`` of them at
    once, up to ``max(depth, workers)`` steps ahead of the consumer (or everything inline
    when disabled).

    ``build`` plans one step (it alone advances the state ``snapshot`` captures: sampler
    position, data stream); ``snapshot`` is called in the same thread right after it;
    ``assemble`` (None: the identity) turns a plan into the step's product in a worker.
    With one worker the planning thread assembles too: one thread, as before workers.
    Exceptions raised by ``build`` or ``assemble`` are re-raised by `get` in the caller's
    thread, at the step that raised (the steps planned before it are handed out first).

    One condition variable guards the ready queue and the count of steps in flight: with one
    worker, a `get` whose step is ready takes one lock and wakes the planning thread once
    (with several, once more after the assembly's result): half the hand-over time of a
    queue, a lock, a future and a semaphore (docs/performance.md, "Batch building").

    Raises:
        ValueError: ``depth < 1`` or ``workers < 1``.
    """

    def __init__(self, build: Callable[[], Any], snapshot: Callable[[], Any], *, enabled: bool = True,
                 depth: int = 2, workers: int = 1, assemble: Callable[[Any], T] | None = None) -> None:
        if depth < 1:
            raise ValueError(f"StepPrefetcher: depth = {depth} must be >= 1")
        if workers < 1:
            raise ValueError(f"StepPrefetcher: workers = {workers} must be >= 1")
        self._plan = build
        self._snapshot = snapshot
        self._assemble: Callable[[Any], T] = assemble if assemble is not None else (lambda plan: plan)
        self.enabled = enabled
        self.depth = depth
        self.workers = workers
        self.ahead = max(depth, workers)  # steps planned and not consumed, at most
        self._cond = threading.Condition(threading.Lock())
        self._ready: deque[tuple[str, Any, Any]] = deque()  # (kind, value | future | exception, state)
        self._started = 0  # steps planned by the thread and not consumed yet
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None

    def _work(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while self._started >= self.ahead and not self._stopping:
                    cond.wait()
                if self._stopping:
                    return
                self._started += 1
            try:
                plan = self._plan()
                state = self._snapshot()
                if self._pool is None:
                    item: tuple[str, Any, Any] = (_VALUE, self._assemble(plan), state)
                else:
                    item = (_FUTURE, self._pool.submit(self._assemble, plan), state)
            except BaseException as exc:  # handed to the training thread, raised there
                item = (_ERROR, exc, None)
            with cond:
                self._ready.append(item)
                cond.notify_all()
            if item[0] == _ERROR:
                return

    def _start(self) -> None:
        self._stopping = False
        self._ready.clear()
        self._started = 0
        if self.workers > 1:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="flowkit-batch")
        self._thread = threading.Thread(target=self._work, name="flowkit-prefetch", daemon=True)
        self._thread.start()

    def get(self) -> Prefetched[T]:
        """The next step's micro-batches, in planning order (waiting for its assembly if it
        is not done); the workers go on with the steps after it.

        Raises:
            Exception: whatever ``build`` or ``assemble`` raised (a bad item, a read error);
                the steps after it are dropped and a later `get` plans on from the state the
                failed step left.
        """
        if not self.enabled:
            return Prefetched(self._assemble(self._plan()), self._snapshot())
        if self._thread is None:
            self._start()
        cond = self._cond
        with cond:
            while not self._ready:
                cond.wait()
            kind, got, state = self._ready.popleft()
            if kind == _VALUE:
                self._started -= 1
                cond.notify_all()  # a slot is free: the planning thread goes on
        if kind == _ERROR:
            assert self._thread is not None
            self._thread.join()  # it returned after handing over the exception
            self._thread = None
            self._shutdown()
            raise got
        if kind == _FUTURE:
            try:
                got = got.result()
            except BaseException:
                self.close()
                raise
            with cond:  # the slot is free once its assembly is done, as with one worker
                self._started -= 1
                cond.notify_all()
        return Prefetched(got, state)

    @property
    def in_flight(self) -> bool:
        """A step was planned ahead and its result is not consumed yet."""
        with self._cond:
            return self._thread is not None and self._started > 0

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        with self._cond:
            self._ready.clear()
            self._started = 0

    def close(self) -> None:
        """Stop planning after the step in flight, wait for the assemblies running and drop
        every unconsumed result (the sampler and data stream stay advanced by them: only a
        snapshot from `get` may be saved afterwards)."""
        if self._thread is not None:
            with self._cond:
                self._stopping = True
                self._cond.notify_all()  # wake the thread if it waits for a free slot
            self._thread.join()
            self._thread = None
        self._shutdown()
