"""zarr chunk files read without zarr's API: the layouts flowkit reads straight from disk.

A latent store's metadata arrays are zstd-compressed chunks (`read_direct` decodes them
with numcodecs, what zarr's ZstdCodec runs); its latents are uncompressed little-endian
chunks at ``latents/c/<i>/0`` (`raw_latent_chunks`), which `StoreReader` reads with
``os.preadv``. A store laid out otherwise is read through zarr's API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["raw_latent_chunks", "read_direct"]


def read_direct(folder: Path, array: Any, stop: int) -> np.ndarray | None:
    """``array[:stop]`` of a zstd-compressed metadata array, read from its chunk files and
    decoded by numcodecs' Zstd (what zarr's ZstdCodec runs), or None when the array is laid
    out otherwise (zarr's API then reads it).

    The same bytes as zarr's read (tests/data/test_latent_store.py checks it) without its
    event-loop round trip per chunk: at a million segments the metadata is ~180 MB
    decoded, and zarr's API took 1.4 s to read it, this 0.5 s (docs/data-format.md).
    """
    from zarr.codecs import BytesCodec, ZstdCodec

    meta = array.metadata
    codecs = list(meta.codecs)
    chunks = tuple(meta.chunk_grid.chunk_shape)
    key = meta.chunk_key_encoding
    if not (len(codecs) == 2 and isinstance(codecs[0], BytesCodec) and isinstance(codecs[1], ZstdCodec)
            and (codecs[0].endian is None or codecs[0].endian.value == "little")
            and getattr(key, "name", "") == "default" and getattr(key, "separator", "") == "/"
            and array.ndim in (1, 2) and (array.ndim == 1 or chunks[1] == array.shape[1])
            and not meta.fill_value):
        return None
    from numcodecs import Zstd

    dtype = np.dtype(str(array.dtype)).newbyteorder("<")
    width = array.shape[1] if array.ndim == 2 else 1
    out = np.zeros((stop, width) if array.ndim == 2 else (stop,), dtype=dtype)
    flat = out.reshape(-1)
    rows = chunks[0]
    codec = Zstd()
    for k in range(-(-stop // rows)):
        file = folder / "c" / str(k) / "0" if array.ndim == 2 else folder / "c" / str(k)
        if not file.is_file():
            continue  # never written: the fill value (0)
        raw = np.frombuffer(codec.decode(file.read_bytes()), dtype=dtype)
        start, end = k * rows, min(stop, (k + 1) * rows)
        flat[start * width : end * width] = raw[: (end - start) * width]
    return out.astype(dtype.newbyteorder("="), copy=False)


def raw_latent_chunks(latents: Any) -> bool:
    """Whether chunk files are raw little-endian arrays at ``latents/c/<i>/0``."""
    from zarr.codecs import BytesCodec

    meta = latents.metadata
    codecs = list(meta.codecs)
    key = meta.chunk_key_encoding
    return (
        len(codecs) == 1
        and isinstance(codecs[0], BytesCodec)
        and (codecs[0].endian is None or codecs[0].endian.value == "little")
        and getattr(key, "name", "") == "default"
        and getattr(key, "separator", "") == "/"
        and tuple(meta.chunk_grid.chunk_shape)[1] == latents.shape[1]
    )
