"""Reading a latent store: validated at open, latents read straight from their chunk files.

The chunk layouts read without zarr's API are `flowkit.data.store.direct`'s; the checks of
a whole store against what prepare wrote (`verify_store`) are `flowkit.data.store.verify`'s.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowkit.data import checksums
from flowkit.data.columns import StringColumn, categorical
from flowkit.data.store.direct import raw_latent_chunks, read_direct
from flowkit.data.store.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    LATENT_DTYPES,
    PARTIAL_MARKER,
    PARTIAL_SUFFIX,
    SEGMENT_ARRAYS,
    STRING_FIELDS,
    chunk_file,
)
from flowkit.errors import DataError


def _fail(path: Path, problem: str) -> DataError:
    return DataError(f"{path}: {problem}")


def _all_finite(block: np.ndarray) -> bool:
    """Whether every value of ``block`` is finite. float16 is checked on its bits (a value
    is inf or NaN exactly when its five exponent bits are all set): numpy's ``isfinite``
    has no vectorised float16 loop and took 3.6 ms of an e13 batch's 11 ms build."""
    if block.dtype == np.float16:
        return bool(block.size == 0 or int(np.bitwise_and(block.view(np.uint16), 0x7C00).max()) != 0x7C00)
    return bool(np.isfinite(block).all())


def _as_float32(block: np.ndarray) -> np.ndarray:
    """``block`` as float32 (the exact values: float16 -> float32 loses nothing).

    float16 goes through torch, whose vectorised conversion is ~20x numpy's ``astype``
    (2.8 ms against 0.14 ms for a 26k-frame batch of 80 channels) and releases the GIL.
    """
    if block.dtype == np.float32:
        return block
    if block.dtype == np.float16 and block.dtype.isnative and block.size:
        import torch

        return torch.from_numpy(block).to(torch.float32).numpy()
    return block.astype(np.float32)


class StoreReader:
    """A validated, read-only view of one store's committed segments.

    ``lengths`` ``[n]`` int64 frames per segment, ``offsets`` ``[n + 1]``, ``strings``
    (name -> `flowkit.data.columns.StringColumn`, a sequence of str decoded on access), ``numeric`` (name -> array
    ``[n]``), ``units`` ``[total_units 4]``
    with ``unit_offsets`` ``[n + 1]``. `read` returns float32 latents.
    """

    def __init__(self) -> None:  # use StoreReader.open
        self.path: Path
        self.attrs: dict[str, Any] = {}
        self._fds: dict[int, int] = {}
        self._pid = os.getpid()
        self._verified: set[int] = set()  # latent chunks whose checksum this process has checked
        self._sums: dict[str, Any] | None = None
        self._meta_crc: dict[str, int] = {}

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> StoreReader:
        """Open and validate the store at ``path`` (zarr mode ``"r"``: never creates anything).

        Raises:
            DataError: one line naming the path and the problem: not found, not a zarr
                group, not a flowkit store, incomplete (interrupted prepare), newer format,
                a missing array, a wrong dtype, a length mismatch, offsets not monotonic.
        """
        import zarr

        path = Path(path)
        if not path.exists():
            raise _fail(path, "no such store (check the path; build one with `flowkit prepare`)")
        if path.name.endswith(PARTIAL_SUFFIX) or (path / PARTIAL_MARKER).exists():
            raise _fail(path, "incomplete store left by an interrupted prepare; "
                        "rerun the same `flowkit prepare` command")
        meta_file = path / "zarr.json"
        if not path.is_dir() or not meta_file.is_file():
            raise _fail(path, "not a zarr v3 store (no zarr.json); build one with `flowkit prepare`")
        try:
            node = json.loads(meta_file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise _fail(path, f"unreadable zarr.json ({exc})") from None
        if node.get("node_type") != "group" or node.get("zarr_format") != 3:
            raise _fail(path, "not a zarr v3 group; build one with `flowkit prepare`")
        attrs_ = node.get("attributes") or {}
        if attrs_.get("flowkit_format") != FORMAT_NAME:
            raise _fail(path, "a zarr group but not a flowkit latent store (no flowkit_format attribute)")
        version = attrs_.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise _fail(path, f"store format version {version} is newer than this flowkit reads ({FORMAT_VERSION}); "
                        "upgrade flowkit")
        if attrs_.get("complete") is not True:
            raise _fail(path, "incomplete store (no completion marker); rerun the `flowkit prepare` that wrote it")
        try:
            group = zarr.open_group(str(path), mode="r", zarr_format=3)
        except Exception as exc:
            raise _fail(path, f"cannot open as zarr ({type(exc).__name__}: {exc})") from None
        self = cls()
        self.path = path
        self.attrs = attrs_
        try:
            self._load(group)
        except DataError:
            raise
        except Exception as exc:  # a chunk zarr cannot decode (garbled or torn file)
            name = getattr(self, "_reading", "?")
            raise _fail(path, f"cannot read array {name!r} ({type(exc).__name__}: {exc}); the store is damaged, "
                        "rebuild it with `flowkit prepare`") from None
        return self

    def _array(self, group: Any, name: str, dtype: str, ndim: int = 1) -> Any:
        self._reading = name  # named by `open` if decoding this array fails
        try:
            array = group[name]
        except KeyError:
            raise _fail(self.path,
                        f"missing array {name!r}; the store is damaged, rebuild it with `flowkit prepare`") from None
        if str(array.dtype) != dtype:
            raise _fail(self.path, f"array {name!r} has dtype {array.dtype}, expected {dtype}")
        if array.ndim != ndim:
            raise _fail(self.path, f"array {name!r} has {array.ndim} dimensions, expected {ndim}")
        return array

    def _values(self, array: Any, name: str, stop: int) -> np.ndarray:
        """``array[:stop]``; a chunk that does not decode (bit rot, a torn copy) is a DataError."""
        try:
            direct = read_direct(self.path / name, array, stop)
            values = direct if direct is not None else np.asarray(array[:stop])
        except Exception as exc:
            raise _fail(self.path, f"cannot read array {name!r} ({type(exc).__name__}: {exc}); the store is damaged, "
                        "rebuild it with `flowkit prepare`") from None
        self._meta_crc[name] = checksums.crc32_of(values)
        return values

    def _offsets(self, group: Any, name: str, n: int, limit: int) -> np.ndarray:
        array = self._array(group, name, "int64")
        if array.shape[0] < n + 1:
            raise _fail(self.path, f"metadata length mismatch: {name!r} has {array.shape[0]} entries for {n} segments "
                        f"(expected {n + 1})")
        values = self._values(array, name, n + 1)
        steps = np.diff(values)
        if values[0] != 0 or (steps < 0).any():
            bad = int(np.argmax(steps < 0)) if (steps < 0).any() else 0
            raise _fail(self.path, f"{name!r} is not monotonic from 0 (at segment {bad}); the store is damaged")
        if values[-1] > limit:
            raise _fail(self.path, f"{name!r} points past its data ({int(values[-1])} > {limit} rows)")
        return values

    def _load(self, group: Any) -> None:
        a = self.attrs
        try:
            n = int(a["n_segments"])
            self.latent_dim = int(a["latent_dim"])
            self.frame_rate = float(a["frame_rate"])
            self.sample_rate = int(a["sample_rate"])
            self.chunk_frames = int(a["layout"]["latents_chunk_frames"])
        except (KeyError, TypeError, ValueError) as exc:
            raise _fail(self.path,
                        f"store attributes lack or garble {exc}; rebuild it with `flowkit prepare`") from None
        self.n_segments = n
        latents = group["latents"] if "latents" in group else None
        if latents is None:
            raise _fail(self.path, "missing array 'latents'; the store is damaged, rebuild it with `flowkit prepare`")
        if str(latents.dtype) not in LATENT_DTYPES or latents.ndim != 2:
            raise _fail(self.path, f"array 'latents' has dtype {latents.dtype} and {latents.ndim} dims, "
                        "expected 2-d float16/float32")
        if latents.shape[1] != self.latent_dim:
            raise _fail(self.path, f"latents have {latents.shape[1]} channels but latent_dim is {self.latent_dim}")
        self.latent_dtype = np.dtype(str(latents.dtype))
        self._latents = latents
        self.offsets = self._offsets(group, "offsets", n, latents.shape[0])
        self.lengths = np.diff(self.offsets)
        self.strings: dict[str, StringColumn] = {}
        for name in STRING_FIELDS:
            blob = self._array(group, name, "uint8")
            offs = self._offsets(group, f"{name}_offsets", n, blob.shape[0])
            try:
                # kept as blob + offsets, decoded per value on access (flowkit.data.columns)
                self.strings[name] = StringColumn(self._values(blob, name, int(offs[-1])), offs)
                self.strings[name].validate_utf8()
            except UnicodeDecodeError:
                raise _fail(self.path, f"array {name!r} is not valid UTF-8; the store is damaged") from None
        self.numeric: dict[str, np.ndarray] = {}
        for name, dtype in SEGMENT_ARRAYS.items():
            array = self._array(group, name, dtype)
            if array.shape[0] < n:
                raise _fail(self.path, f"metadata length mismatch: {name!r} has {array.shape[0]} rows for {n} segments")
            self.numeric[name] = self._values(array, name, n)
        units = self._array(group, "units", "int32", ndim=2)
        self.unit_offsets = self._offsets(group, "unit_offsets", n, units.shape[0])
        self.units = self._values(units, "units", int(self.unit_offsets[-1]))
        self._fast = raw_latent_chunks(latents)
        self._sums = checksums.recorded(a)
        self._check_files()
        self._serve_active_timings()

    def _serve_active_timings(self) -> None:
        """Serve the active timings version (`flowkit.data.store.timings`) instead of prepare's:
        its units, flags and fingerprint; ``timings`` names it (``"prepare"`` for the root arrays)."""
        from flowkit.data.store.timings import PREPARE, read_active

        self.timings = PREPARE
        found = read_active(self.path, self.attrs, self.n_segments)
        if found is None:
            return
        version, record = found
        self.units, self.unit_offsets = version.units, version.unit_offsets
        self.numeric["has_units"] = version.has_units
        self.numeric["units_estimated"] = version.units_estimated
        self.attrs = {**self.attrs, "fingerprint": record["fingerprint"],
                      "prepare_fingerprint": self.attrs["fingerprint"]}
        self.timings = self.attrs["timings"]["active"]

    def _check_files(self) -> None:
        """The cheap checks at open: metadata checksums, every latent chunk file present with its size."""
        damaged = "the store is damaged; rebuild it by re-running `flowkit prepare`"
        sums = self._sums
        if sums is not None:
            for name, crc in sorted(sums.get("arrays", {}).items()):
                if self._meta_crc.get(name) != crc:
                    raise _fail(self.path, f"metadata array {name!r} fails its checksum "
                                f"(crc32 {self._meta_crc.get(name, 0):08x}, {crc:08x} at prepare); {damaged}")
        total = int(self.offsets[-1])
        count = self._n_chunks = checksums.n_chunks(self.chunk_frames, total)
        if sums is not None and len(sums["latent_chunks"]) != count:
            raise _fail(self.path, f"checksums name {len(sums['latent_chunks'])} latent chunks for {count} chunks of "
                        f"committed frames; {damaged}")
        if not self._fast:
            return
        row_bytes = self.latent_dim * self.latent_dtype.itemsize
        for k in range(count):
            file = chunk_file(self.path, k)
            try:
                size = file.stat().st_size
            except FileNotFoundError:
                start, end = checksums.chunk_rows(k, self.chunk_frames, total)
                raise _fail(self.path, f"latent chunk {k} ({file.relative_to(self.path)}, frames {start}-{end}) "
                            f"is missing (it would read as zeros); {damaged}") from None
            want = sums["latent_chunks"][k][0] if sums is not None else None
            short = (checksums.chunk_rows(k, self.chunk_frames, total)[1] - k * self.chunk_frames) * row_bytes
            if (want is not None and size != want) or size < short:
                raise _fail(self.path, f"latent chunk {k} ({file.relative_to(self.path)}) has {size} bytes, "
                            f"{want if want is not None else f'at least {short}'} at prepare; {damaged}")

    def verify_chunk(self, k: int) -> None:
        """Check latent chunk ``k`` against its recorded checksum (once per process; no-op without checksums).

        Raises:
            DataError: the chunk's committed bytes differ from what prepare wrote.
        """
        if os.getpid() != self._pid:
            self._fds, self._verified, self._pid = {}, set(), os.getpid()
        if self._sums is None or k in self._verified:
            return
        start, end = checksums.chunk_rows(k, self.chunk_frames, int(self.offsets[-1]))
        file = chunk_file(self.path, k)
        if self._fast:
            fd = self._fd(k)
            want = (end - start) * self.latent_dim * self.latent_dtype.itemsize
            data = os.pread(fd, want, 0) if fd is not None else b""
            if len(data) != want:
                raise _fail(self.path, f"latent chunk {k} ({file.relative_to(self.path)}) is truncated; "
                            "the store is damaged; rebuild it by re-running `flowkit prepare`")
            crc = checksums.crc32_of(data)
        else:
            crc = checksums.crc32_of(np.asarray(self._latents[start:end]))
        recorded_crc = int(self._sums["latent_chunks"][k][1])
        if crc != recorded_crc:
            raise _fail(self.path, f"latent chunk {k} ({file.relative_to(self.path)}, frames {start}-{end}) fails its "
                        f"checksum (crc32 {crc:08x}, {recorded_crc:08x} at prepare): the file changed after prepare; "
                        "the store is damaged; rebuild it by re-running `flowkit prepare`")
        self._verified.add(k)

    # ---- latents ---------------------------------------------------------
    def _fd(self, chunk: int) -> int | None:
        if os.getpid() != self._pid:  # forked: never share file offsets/handles with the parent
            self._fds, self._verified, self._pid = {}, set(), os.getpid()
        fd = self._fds.get(chunk)
        if fd is None:
            try:
                fd = os.open(chunk_file(self.path, chunk), os.O_RDONLY)
            except FileNotFoundError:
                return None  # never written: zarr's fill value (0)
            self._fds[chunk] = fd
        return fd

    def _read_rows(self, start: int, end: int, out: np.ndarray | None = None) -> np.ndarray:
        """Rows ``[start, end)`` of the latents in the stored dtype, straight from chunk files
        (into ``out`` ``[end - start d]`` when given)."""
        if out is None:
            out = np.empty((end - start, self.latent_dim), dtype=self.latent_dtype.newbyteorder("<"))
        c = self.chunk_frames
        if self._sums is not None:
            if os.getpid() != self._pid:  # forked: this process checks the chunks it reads again
                self._fds, self._verified, self._pid = {}, set(), os.getpid()
            if len(self._verified) < self._n_chunks:  # once all are checked, reads pay nothing more
                for chunk in range(start // c, (end - 1) // c + 1 if end > start else start // c):
                    if chunk not in self._verified:
                        self.verify_chunk(chunk)
        if not self._fast:
            out[:] = self._latents[start:end]
            return out
        row_bytes = self.latent_dim * self.latent_dtype.itemsize
        flat = out.reshape(-1).view(np.uint8)
        pos = start
        while pos < end:
            chunk = pos // c
            stop = min(end, (chunk + 1) * c)
            fd = self._fd(chunk)
            piece = flat[(pos - start) * row_bytes : (stop - start) * row_bytes]
            if fd is None:  # present at open, deleted since
                raise _fail(self.path, f"latent chunk {chunk} ({chunk_file(self.path, chunk).relative_to(self.path)}) "
                            "is missing; the store is damaged; rebuild it by re-running `flowkit prepare`")
            got = os.preadv(fd, [piece], (pos - chunk * c) * row_bytes)
            if got != piece.nbytes:
                raise _fail(self.path, f"latents chunk {chunk} is truncated; the store is damaged")
            pos = stop
        return out

    def read(self, rows: Sequence[int], *, gap_frames: int = 256, check_finite: bool = False,
             as_stored: bool = False) -> list[np.ndarray]:
        """Latents of segments ``rows`` as float32 ``[n_i d]`` (``as_stored``: in the store's
        own dtype, float16 or float32, native byte order), in the order given.

        Reads are sorted by position and coalesced (segments at most ``gap_frames``
        apart are fetched in one read) into one buffer, converted to float32 at once; the
        arrays returned are views of that buffer. ``check_finite``: refuse non-finite
        values (one check of the buffer; the segments are looked at only when it fails).

        Raises:
            DataError: a latent chunk file is shorter than its segments need (truncated), or
                (``check_finite``) a segment holds non-finite latents although its
                ``max_abs`` (checked at open) is finite: the store was damaged after prepare.
        """
        # frame bounds as Python ints, looked up once: the loop below runs per batch
        idx = np.asarray(rows, dtype=np.int64).reshape(-1)
        starts: list[int] = self.offsets[idx].tolist()
        ends: list[int] = self.offsets[idx + 1].tolist()
        order = sorted(range(len(starts)), key=starts.__getitem__)
        runs: list[tuple[int, int, list[int]]] = []  # (first frame, end frame, rows in it)
        k = 0
        while k < len(order):
            run = [order[k]]
            start, end = starts[order[k]], ends[order[k]]
            k += 1
            while k < len(order) and starts[order[k]] - end <= gap_frames:
                run.append(order[k])
                end = max(end, ends[order[k]])
                k += 1
            runs.append((start, end, run))
        total = sum(end - start for start, end, _ in runs)
        raw = np.empty((total, self.latent_dim), dtype=self.latent_dtype.newbyteorder("<"))
        at = 0
        for start, end, _ in runs:
            self._read_rows(start, end, raw[at : at + end - start])
            at += end - start
        if not as_stored:
            block = _as_float32(raw)
        else:  # the stored dtype, in this machine's byte order (a copy only on a big-endian host)
            block = raw if raw.dtype.isnative else raw.astype(raw.dtype.newbyteorder("="))
        out: list[np.ndarray | None] = [None] * len(starts)
        at = 0
        for start, end, run in runs:
            for j in run:
                out[j] = block[at + starts[j] - start : at + ends[j] - start]
            at += end - start
        if check_finite and not _all_finite(block):  # the buffer may hold frames between the rows
            for j, a in enumerate(out):
                if not np.isfinite(a).all():  # type: ignore[union-attr]
                    segment_id = self.strings["segment_id"][int(idx[j])]
                    raise DataError(f"{self.path}: segment {segment_id!r} holds non-finite latents (damaged after "
                                    "prepare); rebuild the store with `flowkit prepare`")
        return out  # type: ignore[return-value]

    def categorical(self, field: str) -> tuple[list[str], np.ndarray]:
        """A string field's distinct values and each segment's code, int32 ``[n]`` (cached;
        see `flowkit.data.columns.categorical`)."""
        cache = self.__dict__.setdefault("_categorical", {})
        if field not in cache:
            cache[field] = categorical(self.strings[field])
        return cache[field]

    def segment_units(self, row: int) -> tuple[tuple[int, int, int, int], ...] | None:
        """Units ``(char_start, char_end, frame_start, frame_end)`` of segment ``row``; None without timings."""
        if not self.numeric["has_units"][row]:
            return None
        # sliced per call: a list of every unit of a large store would cost ~100 bytes a unit
        block = self.units[self.unit_offsets[row] : self.unit_offsets[row + 1]].tolist()
        return tuple(map(tuple, block))

    def close(self) -> None:
        """Close the chunk file handles (a forked child drops its parent's without closing them)."""
        if os.getpid() == self._pid:
            for fd in self._fds.values():
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fds = {}

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __getstate__(self) -> dict[str, Any]:
        # file handles and the zarr array do not cross process boundaries; reopen there
        return {"path": str(self.path)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        other = StoreReader.open(state["path"])
        self.__dict__.update(other.__dict__)
        other._fds = {}
