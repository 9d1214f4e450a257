"""Building the next step's micro-batches while the current step trains.

A step on a GPU takes tens of milliseconds; building its batches (pairing, reads from the
store, collation) takes about as long on the CPU. `StepPrefetcher` runs the build of step
``k + 1`` in one background thread while step ``k`` trains, so the training thread only
waits for what the build has not finished. A thread, not a worker process: the build
spends most of its time in numpy copies and file reads, which release the GIL; a process
would have to pickle every batch back (and reopen the zarr stores, see the design notes
on forking after zarr), which measured slower on 2 cores.

Bit-identical resume still holds. The batches are built by the same code, in the same
order, from the same sampler position and data stream as without prefetching -- only
earlier. The thread owns the sampler and the data stream between builds; each build
returns, with its batches, a *snapshot* of both taken right after it. A checkpoint
records the snapshot of the last step actually consumed, so a batch that was prefetched
but not consumed (the run stopped, or was killed mid-build) leaves no trace: a resume
starts from the state just after the consumed step and builds that batch again.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

__all__ = ["Prefetched", "StepPrefetcher"]

T = TypeVar("T")


@attrs.frozen
class Prefetched(Generic[T]):
    """One step's product and the data-state snapshot taken right after building it."""

    value: T
    state: Any


class StepPrefetcher(Generic[T]):
    """Calls ``build()`` one step ahead in a background thread (or inline when disabled).

    ``build`` makes one step's micro-batches; ``snapshot`` captures the state that build
    advanced (sampler position, data stream), called in the same thread right after it.
    Exceptions raised by ``build`` are re-raised by `get` in the caller's thread.
    """

    def __init__(self, build: Callable[[], T], snapshot: Callable[[], Any], *, enabled: bool = True) -> None:
        self._build = build
        self._snapshot = snapshot
        self.enabled = enabled
        self._results: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
        self._thread: threading.Thread | None = None

    def _make(self) -> Prefetched[T]:
        value = self._build()
        return Prefetched(value, self._snapshot())

    def _work(self) -> None:
        try:
            self._results.put((True, self._make()))
        except BaseException as exc:  # handed to the training thread, raised there
            self._results.put((False, exc))

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="flowkit-prefetch", daemon=True)
        self._thread.start()

    def get(self) -> Prefetched[T]:
        """This step's micro-batches (waiting for the build if it is not done), and start the
        next step's build.

        Raises:
            Exception: whatever ``build`` raised (a bad item, a read error).
        """
        if not self.enabled:
            return self._make()
        if self._thread is None:
            self._start()
        ok, result = self._results.get()
        assert self._thread is not None
        self._thread.join()
        if not ok:
            self._thread = None
            raise result
        self._start()
        return result

    @property
    def in_flight(self) -> bool:
        """A build was started and its result is not consumed yet."""
        return self._thread is not None

    def close(self) -> None:
        """Wait for the build in flight and drop its result (the sampler and data stream stay
        advanced by it: only a snapshot from `get` may be saved afterwards)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            while not self._results.empty():
                self._results.get_nowait()
