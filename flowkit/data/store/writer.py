"""Writing a latent store: a new one in ``<path>.partial`` published by rename, or an
append committed by the ``n_segments`` attribute written last (one writer at a time).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from flowkit.data import checksums
from flowkit.data.store.format import (
    BLOB_CHUNK,
    DEFAULT_CHUNK_FRAMES,
    FORMAT_NAME,
    FORMAT_VERSION,
    LATENT_DTYPES,
    METADATA_CHUNK,
    PARTIAL_MARKER,
    PARTIAL_SUFFIX,
    SEGMENT_ARRAYS,
    STRING_FIELDS,
    SegmentRecord,
    chain_fingerprint,
    chunk_file,
    encode_strings,
    fingerprint_seed,
    latent_digest,
    segment_hash,
)
from flowkit.data.store.reader import StoreReader
from flowkit.errors import DataError


class StoreWriter:
    """Writes segments into a new store (in ``<path>.partial``) or appends to an existing one.

    Latents are buffered and written in whole-chunk pieces; metadata is kept in memory and
    written by `commit`, which then publishes the new segment count (and, for a new
    store, renames the partial folder into place). One writer at a time.
    """

    def __init__(self, path: Path, group: Any, attrs_: dict[str, Any], final_path: Path, new: bool) -> None:
        self.path = path  # where the arrays are being written
        self.final_path = final_path
        self.group = group
        self.attrs = attrs_
        self.new = new
        self.latent_dim = int(attrs_["latent_dim"])
        self.dtype = np.dtype(attrs_["latent_dtype"])
        self.chunk_frames = int(attrs_["layout"]["latents_chunk_frames"])
        self.n0 = int(attrs_["n_segments"])
        self.frames0 = int(attrs_["total_frames"])
        self.units0 = int(attrs_["n_units"])
        self.fingerprint = str(attrs_["fingerprint"])
        self.records: list[dict[str, Any]] = []
        self._pending: list[np.ndarray] = []
        self._pending_frames = 0
        self._written_frames = self.frames0
        self._lengths: list[int] = []
        self.segment_ids: set[str] = set()
        self.created_dirs: list[Path] = []  # parents of a new store's partial folder made for it

    # ---- creation -------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: Path,
        *,
        encoder_name: str,
        encoder_params: dict[str, Any],
        frame_rate: float,
        sample_rate: int,
        latent_dim: int,
        latent_dtype: str = "float16",
        chunk_frames: int = DEFAULT_CHUNK_FRAMES,
        extra_attrs: dict[str, Any] | None = None,
    ) -> StoreWriter:
        """Start a new store at ``path`` (written in ``<path>.partial`` until `commit`).

        A leftover partial folder of an interrupted prepare is removed first.

        Raises:
            DataError: ``path`` already exists, or a folder at ``<path>.partial`` that
                prepare did not create.
        """
        from flowkit.io import missing_dirs, remove_dirs

        if latent_dtype not in LATENT_DTYPES:
            raise DataError(f"latent dtype {latent_dtype!r} is not supported; use one of {LATENT_DTYPES}")
        if path.exists():
            raise DataError(f"{path} already exists; pass --append to add segments, or choose another --out")
        partial = partial_path(path)
        remove_partial(partial)
        created = missing_dirs(partial)  # the partial folder and any parent made for it
        try:
            partial.mkdir(parents=True)
            writer = cls._start(partial, path, encoder_name, encoder_params, frame_rate, sample_rate, latent_dim,
                                latent_dtype, chunk_frames, extra_attrs)
        except BaseException:  # a full disk or Ctrl-C while the empty store is laid out: nothing is left
            shutil.rmtree(partial, ignore_errors=True)
            remove_dirs(created[1:])
            raise
        writer.created_dirs = created[1:]
        return writer

    @classmethod
    def _start(cls, partial: Path, path: Path, encoder_name: str, encoder_params: dict[str, Any], frame_rate: float,
               sample_rate: int, latent_dim: int, latent_dtype: str, chunk_frames: int,
               extra_attrs: dict[str, Any] | None) -> StoreWriter:
        """Lay out the empty arrays and attributes of a new store in ``partial``."""
        import zarr
        from zarr.codecs import ZstdCodec

        (partial / PARTIAL_MARKER).write_text("written by flowkit prepare; removed on a rerun\n")
        # "a", not "w": mode "w" empties the folder, marker included (a rerun would then refuse it)
        group = zarr.open_group(str(partial), mode="a", zarr_format=3)
        uncompressed = {"compressors": None, "filters": None, "config": {"write_empty_chunks": True}}
        group.create_array(
            "latents", shape=(0, latent_dim), chunks=(chunk_frames, latent_dim), dtype=latent_dtype,
            fill_value=0, **uncompressed,
        )
        meta = {"compressors": ZstdCodec(level=3), "filters": None}
        group.create_array("offsets", shape=(1,), chunks=(METADATA_CHUNK,), dtype="int64", fill_value=0, **meta)
        group.create_array("unit_offsets", shape=(1,), chunks=(METADATA_CHUNK,), dtype="int64", fill_value=0, **meta)
        group.create_array("units", shape=(0, 4), chunks=(METADATA_CHUNK, 4), dtype="int32", fill_value=0, **meta)
        for name in STRING_FIELDS:
            group.create_array(name, shape=(0,), chunks=(BLOB_CHUNK,), dtype="uint8", fill_value=0, **meta)
            group.create_array(f"{name}_offsets", shape=(1,), chunks=(METADATA_CHUNK,), dtype="int64", fill_value=0,
                               **meta)
        for name, dtype in SEGMENT_ARRAYS.items():
            group.create_array(name, shape=(0,), chunks=(METADATA_CHUNK,), dtype=dtype, fill_value=0, **meta)
        encoder = {"name": encoder_name, "params": encoder_params}
        attrs_ = {
            "flowkit_format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "complete": False,
            "encoder": encoder,
            "frame_rate": float(frame_rate),
            "sample_rate": int(sample_rate),
            "latent_dim": int(latent_dim),
            "latent_dtype": latent_dtype,
            "n_segments": 0,
            "total_frames": 0,
            "n_units": 0,
            "fingerprint": fingerprint_seed(encoder, latent_dtype),
            "layout": {
                "latents_chunk_frames": int(chunk_frames),
                "latents_codec": "none (bytes, little-endian)",
                "latents_shards": "none",
                "metadata_chunk": METADATA_CHUNK,
                "blob_chunk": BLOB_CHUNK,
                "metadata_codec": "zstd level 3",
                "strings": "utf-8 uint8 blob + int64 byte offsets",
            },
            **(extra_attrs or {}),
        }
        group.attrs.put(attrs_)
        return cls(partial, group, attrs_, path, new=True)

    @classmethod
    def append_to(cls, path: Path) -> StoreWriter:
        """Open a complete store for appending (mode ``r+``); new segments land at `commit`.

        Raises:
            DataError: ``path`` is not a complete, readable store (see `StoreReader.open`).
        """
        import zarr

        path = Path(path)
        reader = StoreReader.open(path)  # validates the store
        ids = set(reader.strings["segment_id"])
        reader.close()
        group = zarr.open_group(str(path), mode="r+", zarr_format=3)
        writer = cls(path, group, dict(group.attrs), path, new=False)
        writer.segment_ids = ids
        return writer

    # ---- writing --------------------------------------------------------
    def add(self, record: SegmentRecord) -> None:
        """Queue one segment (latents ``[n d]``); its latents are written once a whole chunk is pending.

        Raises:
            ValueError: the latents are not ``[n, latent_dim]``.
        """
        lat = np.ascontiguousarray(record.latents, dtype=self.dtype)
        if lat.ndim != 2 or lat.shape[1] != self.latent_dim:
            raise ValueError(f"latents of {record.segment_id} have shape {lat.shape}, expected [n, {self.latent_dim}]")
        meta = record.meta_dict()
        meta["latent_digest"] = latent_digest(lat)
        with np.errstate(invalid="ignore", over="ignore"):
            max_abs = float(np.abs(lat.astype(np.float32)).max()) if lat.size else 0.0
        meta["max_abs"] = max_abs
        self.records.append(meta)
        self.segment_ids.add(record.segment_id)
        self._lengths.append(lat.shape[0])
        self._pending.append(lat)
        self._pending_frames += lat.shape[0]
        if self._pending_frames >= self.chunk_frames:
            self._flush_latents()

    def _flush_latents(self) -> None:
        if not self._pending:
            return
        block = np.concatenate(self._pending, axis=0)
        array = self.group["latents"]
        start = self._written_frames
        array.resize((start + block.shape[0], self.latent_dim))
        array[start : start + block.shape[0]] = block
        self._written_frames += block.shape[0]
        self._pending.clear()
        self._pending_frames = 0

    def _write_tail(self, name: str, start: int, values: np.ndarray, width: int | None = None) -> None:
        array = self.group[name]
        end = start + values.shape[0]
        array.resize((end,) if width is None else (end, width))
        if values.shape[0]:
            array[start:end] = values

    def commit(self) -> Path:
        """Write the metadata, then publish: set ``n_segments`` (and for a new store
        ``complete`` + rename ``<path>.partial`` to ``<path>``). Returns the store path."""
        from flowkit.io import fsync_dir

        self._flush_latents()
        # hashed at commit, not at add: prepare assigns splits once every result is in
        for record in self.records:
            self.fingerprint = chain_fingerprint(self.fingerprint, segment_hash(record["latent_digest"], record))
        n_new = len(self.records)
        n_total = self.n0 + n_new
        offsets = self.frames0 + np.cumsum(np.asarray(self._lengths, dtype=np.int64))
        self._write_tail("offsets", self.n0 + 1, offsets)
        for name in STRING_FIELDS:
            blob, offs = encode_strings([r[name] for r in self.records])
            base = int(self.group[f"{name}_offsets"][self.n0]) if self.n0 else 0  # bytes already committed
            self._write_tail(name, base, blob)
            self._write_tail(f"{name}_offsets", self.n0 + 1, offs[1:] + base)
        intensity = np.array([np.nan if r["intensity"] is None else r["intensity"] for r in self.records], np.float32)
        self._write_tail("intensity", self.n0, intensity)
        self._write_tail("rate", self.n0, np.array([r["rate"] for r in self.records], np.int8))
        self._write_tail("loudness", self.n0, np.array([r["loudness"] for r in self.records], np.int8))
        self._write_tail("max_abs", self.n0, np.array([r["max_abs"] for r in self.records], np.float32))
        self._write_tail("has_units", self.n0, np.array([r["units"] is not None for r in self.records], bool))
        self._write_tail("units_estimated", self.n0, np.array([r["units_estimated"] for r in self.records], bool))
        unit_rows = [u for r in self.records for u in (r["units"] or [])]
        units = np.asarray(unit_rows, dtype=np.int32).reshape(-1, 4)
        n_units = self.units0 + units.shape[0]
        self._write_tail("units", self.units0, units, width=4)
        unit_counts = np.array([len(r["units"] or []) for r in self.records], np.int64)
        self._write_tail("unit_offsets", self.n0 + 1, self.units0 + np.cumsum(unit_counts))
        sums = self._checksums(n_total, int(self._written_frames), int(n_units))
        # the commit point: one atomic write of the group's zarr.json
        new_attrs = dict(self.attrs)
        new_attrs.update(
            n_segments=n_total,
            total_frames=int(self._written_frames),
            n_units=int(n_units),
            fingerprint=self.fingerprint,
            complete=True,
        )
        new_attrs[checksums.ATTR] = sums
        self.group.attrs.put(new_attrs)
        self.attrs = new_attrs
        if self.new:
            (self.path / PARTIAL_MARKER).unlink(missing_ok=True)
            fsync_dir(self.path)
            os.replace(self.path, self.final_path)
            fsync_dir(self.final_path.parent)
        self.n0, self.frames0, self.units0 = n_total, self._written_frames, int(n_units)
        self.records.clear()
        self._lengths.clear()
        return self.final_path

    def _checksums(self, n: int, total_frames: int, n_units: int) -> dict[str, Any]:
        """Checksums of what this commit publishes, read back from the files just written.

        Latent chunks before the first one this writer touched keep their recorded value
        (a store prepared before checksums existed gets all of them).
        """
        old = None if self.new else checksums.recorded(self.attrs)
        chunks = list(old["latent_chunks"]) if old else []
        first = min(len(chunks), self.frames0 // self.chunk_frames)
        del chunks[first:]
        row_bytes = self.latent_dim * self.dtype.itemsize
        for k in range(first, checksums.n_chunks(self.chunk_frames, total_frames)):
            start, end = checksums.chunk_rows(k, self.chunk_frames, total_frames)
            file = chunk_file(self.path, k)
            with open(file, "rb") as f:
                data = f.read((end - start) * row_bytes)
            chunks.append([file.stat().st_size, checksums.crc32_of(data)])
        arrays = {name: checksums.crc32_of(np.asarray(self.group[name][:length]))
                  for name, length in committed_lengths(self.group, n, n_units).items()}
        return {"algorithm": checksums.ALGORITHM, "latent_chunks": chunks, "arrays": arrays}

    def abort(self) -> None:
        """Drop a new store's partial folder and the parents made for it (nothing of an
        appended store is published)."""
        if self.new:
            from flowkit.io import remove_dirs

            remove_partial(self.path)
            remove_dirs(self.created_dirs)


def committed_lengths(group: Any, n: int, n_units: int) -> dict[str, int]:
    """Each metadata array's committed length for ``n`` segments (the part its checksum covers)."""
    lengths = {"offsets": n + 1, "unit_offsets": n + 1, "units": n_units}
    for name in STRING_FIELDS:
        lengths[f"{name}_offsets"] = n + 1
        lengths[name] = int(group[f"{name}_offsets"][n]) if n else 0
    lengths.update({name: n for name in SEGMENT_ARRAYS})
    return lengths


def partial_path(path: Path) -> Path:
    """``<path>.partial``: where a new store is written until `StoreWriter.commit` publishes it."""
    return path.with_name(path.name + PARTIAL_SUFFIX)


def remove_partial(partial: Path) -> None:
    """Remove the partial folder of an interrupted prepare.

    Raises:
        DataError: the folder exists but is not one prepare created (no marker file).
    """
    if not partial.exists():
        return
    # an empty folder is a prepare killed between mkdir and writing its marker
    if not (partial / PARTIAL_MARKER).is_file() and any(partial.iterdir()):
        raise DataError(f"{partial} exists but was not written by flowkit prepare; move it away and rerun")
    shutil.rmtree(partial)
