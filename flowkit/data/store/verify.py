"""Whole-store checks against what prepare wrote: every latent chunk's checksum, or the
recomputed fingerprint of a store prepared before checksums existed.
"""

from __future__ import annotations

import math
from typing import Any

from flowkit.data import checksums
from flowkit.data.store.format import (
    STRING_FIELDS,
    chain_fingerprint,
    fingerprint_seed,
    latent_digest,
    segment_hash,
)
from flowkit.data.store.reader import StoreReader
from flowkit.errors import DataError

__all__ = ["reader_meta", "recompute_fingerprint", "verify_store"]


def verify_store(reader: StoreReader) -> int:
    """Check every latent chunk of ``reader``'s store against its checksum (the metadata
    and chunk files were checked at open). Returns the number of chunks checked; 0 for a
    store prepared before checksums existed, whose fingerprint is recomputed instead.

    Raises:
        DataError: a chunk that differs from what prepare wrote, or (without checksums)
            contents whose fingerprint is not the recorded one.
    """
    if reader._sums is None:
        if recompute_fingerprint(reader) != reader.attrs["fingerprint"]:
            raise DataError(f"{reader.path}: its contents no longer match its fingerprint (it has no per-chunk "
                            "checksums: prepared by an older flowkit); the store is damaged; "
                            "rebuild it by re-running `flowkit prepare`")
        return 0
    count = checksums.n_chunks(reader.chunk_frames, int(reader.offsets[-1]))
    for k in range(count):
        reader.verify_chunk(k)
    return count


def reader_meta(reader: StoreReader, row: int) -> dict[str, Any]:
    """Segment ``row``'s metadata as `SegmentRecord.meta_dict` wrote it (for fingerprints)."""
    intensity = float(reader.numeric["intensity"][row])
    units = reader.segment_units(row)
    return {
        **{name: reader.strings[name][row] for name in STRING_FIELDS},
        "intensity": None if math.isnan(intensity) else intensity,
        "rate": int(reader.numeric["rate"][row]),
        "loudness": int(reader.numeric["loudness"][row]),
        "units": None if units is None else [list(u) for u in units],
        "units_estimated": bool(reader.numeric["units_estimated"][row]),
    }


def recompute_fingerprint(reader: StoreReader) -> str:
    """The store fingerprint recomputed from its contents (equals ``attrs["fingerprint"]`` when intact)."""
    fp = fingerprint_seed(reader.attrs["encoder"], reader.attrs["latent_dtype"])
    for row in range(reader.n_segments):
        raw = reader._read_rows(int(reader.offsets[row]), int(reader.offsets[row + 1]))
        fp = chain_fingerprint(fp, segment_hash(latent_digest(raw), reader_meta(reader, row)))
    return fp
