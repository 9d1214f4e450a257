"""Python's cyclic garbage collector during training: at known steps, not whenever it fires.

CPython's collector runs when allocations outnumber deallocations by a threshold, in
whichever thread made the allocation that crossed it, and holds the GIL for the whole
collection. The batch builders (`flowkit.batching.prefetch`) allocate most of a run's
Python objects, and a run holds hundreds of thousands of long-lived ones (decoded
segments, the vocabulary, the model's modules), so a collection that reaches the oldest
generation takes tens of milliseconds and the training thread waits for the GIL behind
it; on a GPU host the GPU idles meanwhile (measurements: docs/performance.md, "Batch
building").

`GarbageCollection` turns automatic collection off for the loop and collects at fixed
steps instead, in the training thread: the young generations (``gc.collect(1)``) every
``every`` steps and everything every ``FULL_EVERY`` such collections. The same policy as
torchtitan's ``GarbageCollection`` (``training.gc_freq``) and Megatron-LM's ``--manual-gc``;
reference counting still frees every object that is not in a reference cycle at once.
On entry it also moves what the run set up (modules, vocabulary, segment tables) out of
the collector's reach (``gc.freeze``), and freezes again what survives each full
collection (the builder's segment cache fills during the loop): a full collection then
scans only what the loop allocated since the last one. Frozen objects are still freed by
reference counting; only reference cycles among them wait for the end of the loop, which
unfreezes them. The generations named are CPython's up to 3.13; 3.14's incremental
collector reads ``gc.collect(1)`` as the young generation and an increment of the old.
"""

from __future__ import annotations

import gc
import time
from types import TracebackType

__all__ = ["FULL_EVERY", "GarbageCollection"]

#: every FULL_EVERY-th scheduled collection also collects the oldest generation, so cyclic
#: garbage that survived the young collections is freed too (a run's memory does not creep).
FULL_EVERY = 10


class GarbageCollection:
    """Automatic collection off inside ``with`` (what existed on entry frozen), collections
    at every ``every``-th step.

    ``every`` None leaves Python's automatic collection as it is (and `maybe_collect` does
    nothing). On exit the collector is set back to what it was on entry (and what it froze
    unfrozen). ``seconds`` and ``collections`` count what the scheduled collections cost
    (tools/bench_trainer.py prints them).

    Raises:
        ValueError: ``every < 1``.
    """

    def __init__(self, every: int | None) -> None:
        if every is not None and every < 1:
            raise ValueError(f"GarbageCollection: every = {every} must be >= 1, "
                             "or None for Python's automatic collection")
        self.every = every
        self.collections = 0
        self.seconds = 0.0
        self._was_enabled: bool | None = None
        self._freezes = False

    def __enter__(self) -> GarbageCollection:
        if self._was_enabled is not None:
            raise RuntimeError("GarbageCollection is already in force; enter it once")
        if self.every is not None:
            self._was_enabled = gc.isenabled()
            # freezing and unfreezing is process-wide: a caller's own freeze is left alone
            self._freezes = gc.get_freeze_count() == 0
            gc.collect()  # start from a clean heap: what setup left in cycles goes now
            if self._freezes:
                gc.freeze()  # the set-up's objects: never scanned again while the loop runs
            gc.disable()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._was_enabled is not None:
            if self._freezes:
                gc.unfreeze()
            if self._was_enabled:
                gc.enable()
        self._was_enabled = None

    def maybe_collect(self, step: int) -> bool:
        """Collect if ``step`` (>= 1) is a multiple of ``every``; True when it collected.
        The ``FULL_EVERY``-th such collection is a full one (``gc.collect(2)``), after which
        what survived is frozen too, so the next full one scans only what came after."""
        if self.every is None or step < 1 or step % self.every:
            return False
        started = time.perf_counter()
        self.collections += 1
        if self.collections % FULL_EVERY:
            gc.collect(1)
        else:
            gc.collect(2)
            if self._freezes:
                gc.freeze()  # what survived is long-lived (e.g. the builder's segment cache)
        self.seconds += time.perf_counter() - started
        return True
