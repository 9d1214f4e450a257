"""Latent-store benchmarks, printed as figures and ratios measured in one run.

1. prepare speed of the shared corpus (log_mel, 2 workers) as a multiple of real time;
2. batch assembly of 32 random segments (100-800 frames) from the store vs from an
   uncompressed numpy memmap of the same latents (medians of many repeats), for a few
   chunk sizes, plus zarr's own API for reference; the store reads with its checksums on
   (each chunk verified on its first read in the process, as training reads), next to the
   same reads with the checks off, and the one-off cost of verifying every chunk;
3. open + validate + build the batch sampler of synthetic 100k- and 1M-segment stores
   (time and peak RSS, measured in a fresh process), and restoring a sampler position
   early and late in an epoch (the same cost: resume is O(1) in the position);
4. sharded prepare of the corpus with 1, 2 and 4 shards run at once as separate
   processes (one worker each), as a multiple of real time.

Usage: python tools/bench_store.py [--corpus DIR] [--repeats N] [--workdir DIR] [--sizes 100000,1000000]
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def bench_prepare(corpus: Path, work: Path) -> Path:
    from flowkit.data.prepare import prepare_store

    out = work / "corpus.zarr"
    summary = prepare_store([corpus], out, workers=2, progress=False)
    print(f"prepare: {summary.accepted} accepted, {dict(summary.rejected)} rejected, "
          f"{summary.decoded_seconds / 60:.1f} min of audio in {summary.wall_seconds:.1f} s "
          f"= {summary.speed:.0f}x real time (target >= 50x)")
    return out


def rechunk(src: Path, dst: Path, chunk_frames: int, compressed: bool = False) -> Path:
    """A copy of ``src``'s latents with another chunk size (metadata kept minimal)."""
    import zarr
    from zarr.codecs import ZstdCodec

    from flowkit.data.store import StoreReader

    reader = StoreReader.open(src)
    data = reader._read_rows(0, int(reader.offsets[-1]))
    group = zarr.open_group(str(dst), mode="w", zarr_format=3)
    group.create_array("latents", data=data, chunks=(chunk_frames, data.shape[1]),
                       compressors=ZstdCodec(level=3) if compressed else None, filters=None)
    return dst


def bench_batches(store: Path, work: Path, repeats: int) -> None:
    import zarr

    from flowkit.data.store import StoreReader

    reader = StoreReader.open(store)
    offsets = reader.offsets
    eligible = np.nonzero((reader.lengths >= 100) & (reader.lengths <= 800))[0]
    ref = work / "latents.f16"
    reader._read_rows(0, int(offsets[-1])).tofile(ref)
    mm = np.memmap(ref, dtype="<f2", mode="r").reshape(-1, reader.latent_dim)
    rng = np.random.default_rng(0)
    batches = [rng.choice(eligible, 32, replace=False).tolist() for _ in range(repeats)]

    def time_it(fn) -> float:
        for b in batches[:5]:
            fn(b)  # warm the page cache and file handles
        times = []
        for b in batches:
            t = time.perf_counter()
            fn(b)
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    base = time_it(lambda b: [np.asarray(mm[offsets[i] : offsets[i + 1]], dtype=np.float32) for i in b])
    print(f"batch of 32 segments (100-800 frames, d={reader.latent_dim}, fp16 -> float32), median of {repeats}:")
    print(f"  numpy memmap (reference)            {base * 1e3:8.3f} ms   1.00x")
    from flowkit.data.store import verify_store

    fresh = StoreReader.open(store)  # no chunk verified yet in this reader: the warm-up verifies them
    store_t = time_it(fresh.read)
    chunk = reader.chunk_frames
    print(f"  store fast path, {chunk:>6}-frame chunks {store_t * 1e3:8.3f} ms   {store_t / base:.2f}x "
          "(checksums on; target <= 1.3x)")
    unchecked = StoreReader.open(store)
    unchecked._sums = None  # the same reader with the checksum checks off
    t = time_it(unchecked.read)
    print(f"  same, checksum checks off           {t * 1e3:8.3f} ms   {t / base:.2f}x")
    t_mm, t_verify = [], []
    for _ in range(5):
        t = time.perf_counter()
        float(np.asarray(mm, dtype=np.float32).sum())  # the whole store through the memmap, once
        t_mm.append(time.perf_counter() - t)
        again = StoreReader.open(store)
        t = time.perf_counter()
        n_chunks = verify_store(again)
        t_verify.append(time.perf_counter() - t)
    mb = mm.nbytes / 1e6
    print(f"  verify all {n_chunks} chunks once ({mb:.0f} MB)  {statistics.median(t_verify) * 1e3:8.1f} ms   "
          f"{statistics.median(t_verify) / statistics.median(t_mm):.2f}x one float32 pass over the memmap "
          f"({statistics.median(t_mm) * 1e3:.1f} ms); paid once per process")
    for frames in (4096, 262144):
        alt = rechunk(store, work / f"c{frames}.zarr", frames)
        r2 = _borrow(reader, alt, frames)
        t = time_it(r2.read)
        print(f"  store fast path, {frames:>6}-frame chunks {t * 1e3:8.3f} ms   {t / base:.2f}x")
    api = zarr.open_group(str(store), mode="r")["latents"]
    t = time_it(lambda b: [np.asarray(api[offsets[i] : offsets[i + 1]], dtype=np.float32) for i in b[:8]]) * 4
    print(f"  zarr API per segment, uncompressed  {t * 1e3:8.3f} ms   {t / base:.1f}x (32 extrapolated from 8)")
    z = zarr.open_group(str(rechunk(store, work / "zstd.zarr", 16384, compressed=True)), mode="r")["latents"]
    t = time_it(lambda b: [np.asarray(z[offsets[i] : offsets[i + 1]], dtype=np.float32) for i in b[:4]]) * 8
    print(f"  zarr API per segment, zstd 16k      {t * 1e3:8.3f} ms   {t / base:.1f}x (32 extrapolated from 4)")
    raw = reader._read_rows(0, int(offsets[-1])).nbytes
    zbytes = sum(p.stat().st_size for p in (work / "zstd.zarr" / "latents").rglob("*") if p.is_file())
    print(f"  zstd size / raw size: {zbytes / raw:.2f}")


def _borrow(reader, path: Path, frames: int):
    """A reader on another chunking of the same latents (offsets borrowed from ``reader``)."""
    import copy

    import zarr

    other = copy.copy(reader)
    other.path = path
    other.chunk_frames = frames
    other._fds = {}
    other._sums, other._verified = None, set()  # a bare zarr copy: no checksums recorded
    other._latents = zarr.open_group(str(path), mode="r")["latents"]
    return other


_OPEN_CHILD = """
import sys, time
t = time.perf_counter()
from flowkit.data.dataset import LatentDataset
from flowkit.batching.samplers import BatchStream, FrameBudget
from flowkit.batching.pairing import InClip
t_import = time.perf_counter() - t
t = time.perf_counter()
ds = LatentDataset.open([sys.argv[1]], "train")
t_open = time.perf_counter() - t
stream = BatchStream(FrameBudget(), InClip().budget_lengths(ds.segments), seed=0)
n_batches = len(stream.plan(0).batches)
elapsed = time.perf_counter() - t
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork + exec, so the child would
# report the parent's peak (the parent held the 1M records it just wrote)
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
resumes = []
for epoch, batch in ((0, 1), (7, n_batches - 1)):
    t = time.perf_counter()
    fresh = BatchStream(FrameBudget(), InClip().budget_lengths(ds.segments), seed=0)
    fresh.load_state_dict({"epoch": epoch, "batch": batch, "stream": "train"})
    fresh.next()
    resumes.append(time.perf_counter() - t)
print(f"{len(ds)} {elapsed:.3f} {t_open:.3f} {rss:.0f} {t_import:.2f} {n_batches} {resumes[0]:.3f} {resumes[1]:.3f}")
"""


def bench_open(work: Path, n: int = 100_000, frames: int = 8, dim: int = 80) -> None:
    from flowkit.data.store import SegmentRecord, StoreWriter

    path = work / f"big-{n}.zarr"
    t = time.perf_counter()
    writer = StoreWriter.create(path, encoder_name="synthetic", encoder_params={}, frame_rate=100.0,
                                sample_rate=16000, latent_dim=dim)
    rng = np.random.default_rng(0)
    block = rng.standard_normal((frames, dim)).astype(np.float16)
    for i in range(n):
        writer.add(SegmentRecord(f"spk{i % 500:03d}_{i:07d}", f"spk{i % 500:03d}", ("en", "fr")[i % 2], "",
                                 math.nan, 3, 3, "val" if i % 50 == 0 else "train", f"a synthetic sentence number {i}.",
                                 block, ((0, 1, 0, 4), (2, 11, 4, 8)), True))
    writer.commit()
    print(f"synthetic store: {n} segments written in {time.perf_counter() - t:.1f} s")
    out = subprocess.run([sys.executable, "-c", _OPEN_CHILD, str(path)], capture_output=True, text=True, check=True)
    count, elapsed, t_open, rss, t_import, n_batches, early, late = out.stdout.split()
    print(f"open + validate + sampler of {n} segments ({count} train, {n_batches} batches in epoch 0): "
          f"{float(elapsed):.2f} s (open + validate {float(t_open):.2f} s; target < 2 s), peak RSS {float(rss):.0f} MB "
          f"(target < 1 GB; imports took {t_import} s)")
    print(f"  sampler resume: position (0, 1) {float(early) * 1e3:.0f} ms, position (7, {int(n_batches) - 1}) "
          f"{float(late) * 1e3:.0f} ms (one epoch plan either way)")
    shutil.rmtree(path, ignore_errors=True)


_SHARD_CHILD = """
import json, sys
from pathlib import Path
from flowkit.data.prepare import prepare_store
s = prepare_store([Path(sys.argv[1])], Path(sys.argv[2]), workers=1, progress=False, \
shard=(int(sys.argv[3]), int(sys.argv[4])))
print(json.dumps({"decoded": s.decoded_seconds, "wall": s.wall_seconds, "accepted": s.accepted}))
"""


def bench_shards(corpus: Path, work: Path, counts: tuple[int, ...] = (1, 2, 4)) -> None:
    """Each shard count run as that many concurrent processes (one worker each), as N machines would."""
    import json

    print("sharded prepare (N processes at once, 1 worker each, on this machine's cores):")
    for n in counts:
        out = work / f"shards-{n}"
        t = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", _SHARD_CHILD, str(corpus), str(out), str(i), str(n)],
                                  stdout=subprocess.PIPE, text=True) for i in range(n)]
        results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        wall = time.perf_counter() - t
        audio = sum(r["decoded"] for r in results)
        each = ", ".join(f"{r['decoded'] / r['wall']:.0f}x" for r in results)
        print(f"  {n} shard(s): {sum(r['accepted'] for r in results)} segments, {audio / 60:.1f} min of audio in "
              f"{wall:.1f} s = {audio / wall:.0f}x real time overall (each shard: {each})")
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "data" / "asterisk-5voice")
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--sizes", default="100000,1000000", help="segment counts of the open benchmark")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: prepare,batches,open,shards")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if not (args.corpus / "metadata.csv").is_file():
        sys.exit(f"corpus not found at {args.corpus}; pass --corpus DIR")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="flowkit-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if not {"prepare", "batches"} <= skip:
            store = bench_prepare(args.corpus, work)
            if "batches" not in skip:
                bench_batches(store, work, args.repeats)
        if "open" not in skip:
            for n in (int(x) for x in args.sizes.split(",")):
                bench_open(work, n)
        if "shards" not in skip:
            bench_shards(args.corpus, work)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
