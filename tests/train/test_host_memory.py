"""flowkit.batching.host_memory: freed batch-sized blocks stay in the process, so the next
build does not fault its memory in again (faulting it in again stalls the data stream);
a run sets it at launch where ``Trainer.keep_freed_memory`` asks for it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from train_helpers import train

from flowkit.batching.host_memory import keep_freed_memory
from flowkit.train import run

# A prefetch-like pattern in a fresh process, in lock step (the same order of allocations
# and frees on every run): a thread allocates and writes three 20 MB arrays per "batch",
# the main thread takes each batch and frees the one it took two batches earlier; prints
# the minor page faults of batches 6-30 (after the first ones have grown the heaps).
CHURN = textwrap.dedent("""
    import queue, resource, sys, threading
    import numpy as np
    if sys.argv[1] == "keep":
        from flowkit.batching.host_memory import keep_freed_memory
        assert keep_freed_memory()
    batches, go = queue.Queue(), threading.Semaphore(0)
    def build():
        for _ in range(30):
            arrays = [np.empty((52, 1000, 100), np.float32) for _ in range(3)]
            for a in arrays:
                a[...] = 1.0
            batches.put(arrays)
            del arrays
            go.acquire()
    thread = threading.Thread(target=build)
    thread.start()
    held, faults = [], []
    for _ in range(30):
        held.append(batches.get())
        if len(held) > 2:
            del held[0]
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
        go.release()
    thread.join()
    print(faults[-1] - faults[5])
""")



def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_freed_batch_memory_is_reused_instead_of_faulted_in_again():
    if not keep_freed_memory():
        pytest.skip("not glibc: keep_freed_memory is a no-op here")
    default, kept = _faults("default"), _faults("keep")
    # 24 batches of 60 MB: with glibc's defaults ~15,000 pages (4 KiB) are unmapped and faulted in again
    assert kept < 500, (default, kept)
    assert default > 20 * max(kept, 1), (default, kept)


def test_keep_freed_memory_is_idempotent():
    first = keep_freed_memory()
    assert keep_freed_memory() is first


def test_numpy_stops_asking_for_huge_pages():
    if not sys.platform.startswith("linux"):
        pytest.skip("numpy asks for huge pages on Linux only")
    probe = textwrap.dedent("""
        from numpy._core import multiarray
        from flowkit.batching.host_memory import keep_freed_memory
        before = multiarray._set_madvise_hugepage(True)  # numpy's default, returns the previous state
        keep_freed_memory()
        print(before, multiarray._set_madvise_hugepage(False))  # the state keep_freed_memory left
    """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split()[1] == "False", out.stdout


@pytest.mark.parametrize("keep", [True, False])
def test_the_launch_sets_the_host_memory_only_where_the_run_asks(keep, monkeypatch, tiny_store, tmp_path):
    calls: list[bool] = []
    monkeypatch.setattr(run, "keep_freed_memory", lambda: calls.append(True) or True)
    train(tiny_store, tmp_path / "run", f"Trainer.keep_freed_memory = {keep}", steps=1)
    assert calls == ([True] if keep else [])
    assert f"Trainer.keep_freed_memory = {keep}" in (tmp_path / "run" / "config.gin").read_text()
