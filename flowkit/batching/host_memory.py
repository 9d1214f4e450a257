"""Keeping freed host memory inside the process, so batch builds do not fault fresh pages in.

A production-budget batch holds a few padded arrays of 10-20 MB (``x1``, the prompt, the
store's read buffer). They are allocated in the prefetch thread and freed in the training
thread a few steps later. With glibc's default settings that memory keeps going back to the
kernel: freed space at the top of a heap beyond the trim threshold (dynamically about twice
the largest freed block) is trimmed, and a thread arena's heap that becomes entirely free
is unmapped whatever the threshold. The next build then faults its arrays in again page by
page, several times slower than a build that reuses freed memory (figures: docs/performance.md,
"Batch building").

`keep_freed_memory` sets glibc's mmap threshold to its maximum (32 MB: blocks up to that
size come from a heap, not from a mapping of their own, which is unmapped on free), the trim
threshold to 1 GiB, and one arena for every thread (the main one, which is never unmapped),
so freed blocks stay in the process and the next batch reuses them. The process's resident
memory then stays near its peak instead of shrinking between steps, and the threads share
one allocator lock (a build makes few large allocations). It must run before a second
thread allocates: `flowkit.train.run` calls it at launch, where ``Trainer.keep_freed_memory``
(default True) asks for it. A no-op where the C library is not glibc (macOS, musl).

It then grows the heap by `RESERVE` (just under the trim threshold) of address space and
frees it at once, without writing to it: nothing is faulted in and resident memory does not
grow, but the heap's free top is then large enough for the first passes' tensors: the
step-0 evaluation, which runs before the first training step has grown the heap, otherwise
faults its tensors in page by page at every pass.

It also stops numpy from asking for transparent huge pages (``madvise(MADV_HUGEPAGE)`` on
every array of 4 MB and more, numpy's default on Linux). Where the kernel's THP ``defrag``
setting is ``madvise`` (a common default), a huge-page fault on such a region compacts
memory synchronously first, so a batch that needs more memory than any before it collates
several times slower. Batch arrays are written once and read once, so huge pages buy them
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
#: The largest mmap threshold glibc accepts on 64-bit (its DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD = 32 * 1024 * 1024
#: Freed memory at the top of the heap that glibc keeps instead of trimming.
TRIM_THRESHOLD = 1024 * 1024 * 1024
#: Address space the heap is grown by once, before training allocates (no memory is used).
RESERVE = TRIM_THRESHOLD - 64 * 1024 * 1024

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks of up to 32 MB in the process, and numpy not to ask for
    huge pages (once per process).

    Returns whether glibc's settings took effect (False off glibc). Never raises."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if not sys.platform.startswith("linux"):
        return False
    _no_numpy_huge_pages()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 -- glibc only (musl has mallopt as a stub)
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _done = all(
        mallopt(param, value)
        for param, value in ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                             (_M_ARENA_MAX, 1))
    )
    if _done:
        _reserve_heap(libc, RESERVE)
    return _done


def _reserve_heap(libc: ctypes.CDLL, nbytes: int) -> None:
    """Grow the heap by ``nbytes`` of address space (blocks below the mmap threshold, never
    written: no page is faulted in, resident memory does not grow) and free it again, so
    the first steps' and the first evaluation's tensors are carved from a heap that stays,
    instead of being mapped and unmapped, and faulted in afresh, at every pass."""
    malloc, free = libc.malloc, libc.free
    malloc.argtypes, malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    free.argtypes, free.restype = [ctypes.c_void_p], None
    block = MMAP_THRESHOLD - (1 << 20)
    blocks = []
    for _ in range(nbytes // block):
        pointer = malloc(block)
        if not pointer:
            break
        blocks.append(pointer)
    for pointer in reversed(blocks):
        free(pointer)


def _no_numpy_huge_pages() -> None:
    """Turn numpy's ``madvise(MADV_HUGEPAGE)`` on large arrays off (where this numpy has the
    switch: numpy 1.20 and later on Linux)."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray
    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)
