"""Checksums of a latent store's committed bytes: one per latent chunk, one per metadata array.

`StoreWriter.commit` records them in the group attribute ``checksums``, in the same atomic
write of ``zarr.json`` that publishes the segments::

    {"algorithm": "crc32",
     "latent_chunks": [[file_bytes, crc], ...],   # chunk k = latents/c/<k>/0
     "arrays": {"offsets": crc, "text": crc, ...}}

A latent chunk's checksum covers the *committed* rows it holds (their little-endian row
bytes), and its size is the chunk file's size: an interrupted append rewrites the tail of
the last chunk past the committed rows and leaves its checksum valid. A metadata array's
checksum covers its committed values (``offsets[:n + 1]``, ``text[:bytes]``, ...) as
little-endian bytes, whatever codec stored them.

`StoreReader` checks them: at open, that every chunk file exists with its recorded size
(one ``stat`` per chunk) and the metadata arrays (read whole at open anyway); on the first
read of a chunk in a process, the chunk's checksum; `verify_store` checks every chunk
(``flowkit prepare --verify STORE``, and `flowkit resume` before training on a store).

The checksum is zlib's CRC-32 (the standard library): 2.7 GB/s on this machine, six times
sha256. It finds accidental damage - a deleted, truncated, garbled or overwritten file -
which is what it is for; the store's sha256 fingerprint names the content.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

ALGORITHM = "crc32"
ATTR = "checksums"


def crc32_of(values: np.ndarray | bytes | memoryview) -> int:
    """CRC-32 of an array's little-endian C-order bytes (or of raw bytes)."""
    if isinstance(values, np.ndarray):
        data = np.ascontiguousarray(values)
        if data.dtype.byteorder == ">" or (data.dtype.byteorder == "=" and np.little_endian is False):
            data = data.astype(data.dtype.newbyteorder("<"))
        values = data.reshape(-1).view(np.uint8)
    return zlib.crc32(values) & 0xFFFFFFFF


def chunk_rows(k: int, chunk_frames: int, total_frames: int) -> tuple[int, int]:
    """Committed rows ``[start, end)`` of latent chunk ``k``."""
    return k * chunk_frames, min((k + 1) * chunk_frames, total_frames)


def n_chunks(chunk_frames: int, total_frames: int) -> int:
    """Latent chunk files a store of ``total_frames`` committed rows must hold."""
    return -(-total_frames // chunk_frames)


def recorded(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """The store's recorded checksums, or None for a store prepared before they existed."""
    value = attrs.get(ATTR)
    return value if isinstance(value, dict) and value.get("algorithm") == ALGORITHM else None


__all__ = ["ALGORITHM", "ATTR", "chunk_rows", "crc32_of", "n_chunks", "recorded"]
