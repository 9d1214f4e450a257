"""The latent store: a zarr v3 group holding every segment's latents and metadata.

Layout (format version 1; docs/data-format.md describes each field and the measured
choices):

- ``latents`` ``[total_frames, d]`` float16 (or float32): all segments concatenated, in
  large *uncompressed* chunks of ``chunk_frames`` rows, no sharding. Uncompressed chunk
  files are plain little-endian C-order arrays, so `StoreReader.read` computes byte ranges
  from ``offsets`` and reads the chunk files directly (``os.preadv``), sorted and
  coalesced; zarr's API still reads the same store (a test checks the bytes agree).
- ``offsets`` ``[n + 1]`` int64: segment ``i`` is ``latents[offsets[i]:offsets[i+1]]``.
- strings (``segment_id``, ``speaker``, ``language``, ``emotion``, ``split``, ``text``):
  zarr 3 has no ragged dtype, so each is a uint8 UTF-8 blob ``<name>`` plus
  ``<name>_offsets`` ``[n + 1]`` int64 byte offsets. Only standard dtypes: any zarr v3
  client reads them.
- ``intensity`` float32 (nan unknown), ``rate``/``loudness`` int8 buckets (0 unknown),
  ``max_abs`` float32 (largest |latent| of each segment, checked at load),
  ``has_units``/``units_estimated`` bool, ``unit_offsets`` ``[n + 1]`` int64 and
  ``units`` ``[total_units, 4]`` int32 ``(char_start, char_end, frame_start, frame_end)``.

Metadata arrays are zstd-compressed (they are read whole, once, at open).

Checksums (`flowkit.data.checksums`): the commit records a CRC-32 per latent chunk and
per metadata array. Opening a store checks that every latent chunk file exists with its
recorded size and that the metadata arrays match; a process verifies a chunk's checksum
the first time it reads from it; `verify_store` checks every chunk. A mismatch is a
`DataError` naming the store, the chunk or array, and the fix.

Commit protocol. Arrays may hold more rows than the store has *committed*: the group
attribute ``n_segments`` is the committed count and is written last (one atomic file
write), so a reader only ever sees committed segments and an interrupted append leaves
the store as it was. A new store is written in ``<path>.partial`` and renamed into place
after its ``complete`` attribute is set; readers refuse a store without it.

zarr-python 3 runs a background event-loop thread: a process forked after using zarr can
deadlock. DataLoader workers must open their own `StoreReader` (or use the spawn start
method); the fast read path reopens its file handles after a fork.
"""

from flowkit.data.store.format import (
    DEFAULT_CHUNK_FRAMES,
    FORMAT_NAME,
    FORMAT_VERSION,
    LATENT_DTYPES,
    PARTIAL_MARKER,
    PARTIAL_SUFFIX,
    REJECTIONS_FILE,
    SEGMENT_ARRAYS,
    STRING_FIELDS,
    SegmentRecord,
    chain_fingerprint,
    chunk_file,
    decode_strings,
    fingerprint_seed,
    latent_digest,
    segment_hash,
)
from flowkit.data.store.reader import StoreReader
from flowkit.data.store.verify import reader_meta, recompute_fingerprint, verify_store
from flowkit.data.store.writer import StoreWriter, committed_lengths, partial_path, remove_partial

__all__ = [
    "DEFAULT_CHUNK_FRAMES",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "LATENT_DTYPES",
    "PARTIAL_MARKER",
    "PARTIAL_SUFFIX",
    "REJECTIONS_FILE",
    "SEGMENT_ARRAYS",
    "STRING_FIELDS",
    "SegmentRecord",
    "StoreReader",
    "StoreWriter",
    "chain_fingerprint",
    "chunk_file",
    "committed_lengths",
    "decode_strings",
    "fingerprint_seed",
    "latent_digest",
    "partial_path",
    "reader_meta",
    "recompute_fingerprint",
    "remove_partial",
    "segment_hash",
    "verify_store",
]
