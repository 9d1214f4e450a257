"""The latent store's on-disk format: names, dtypes, the segment record, hashing, string blobs.

What the writer and the reader of `flowkit.data.store` agree on (the layout is described
in the package docstring and field by field in docs/data-format.md).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

FORMAT_NAME = "flowkit-latent-store"
FORMAT_VERSION = 1
PARTIAL_SUFFIX = ".partial"
PARTIAL_MARKER = "flowkit-partial-store"  # file inside a partial dir: safe to delete on rerun
REJECTIONS_FILE = "rejections.jsonl"

STRING_FIELDS: tuple[str, ...] = ("segment_id", "speaker", "language", "emotion", "split", "text")
#: numeric per-segment arrays and their dtypes
SEGMENT_ARRAYS: dict[str, str] = {
    "intensity": "float32",
    "rate": "int8",
    "loudness": "int8",
    "max_abs": "float32",
    "has_units": "bool",
    "units_estimated": "bool",
}
#: rows of latents per chunk file; chosen by measurement (docs/data-format.md)
DEFAULT_CHUNK_FRAMES = 32768
METADATA_CHUNK = 1 << 18  # elements per chunk of 1-d metadata arrays
BLOB_CHUNK = 1 << 22  # bytes per chunk of the string blobs
LATENT_DTYPES = ("float16", "float32")
_HASHED_FIELDS = (*STRING_FIELDS, "intensity", "rate", "loudness", "units", "units_estimated")


@attrs.frozen
class SegmentRecord:
    """One segment as prepare writes it; ``latents`` is ``[n d]`` in the store's dtype."""

    segment_id: str
    speaker: str
    language: str
    emotion: str
    intensity: float
    rate: int
    loudness: int
    split: str
    text: str
    latents: np.ndarray
    units: tuple[tuple[int, int, int, int], ...] | None = None
    units_estimated: bool = False

    def meta_dict(self) -> dict[str, Any]:
        """Metadata as JSON-able values (hashed into the fingerprint)."""
        return {
            "segment_id": self.segment_id,
            "speaker": self.speaker,
            "language": self.language,
            "emotion": self.emotion,
            "intensity": None if math.isnan(self.intensity) else float(np.float32(self.intensity)),
            "rate": int(self.rate),
            "loudness": int(self.loudness),
            "split": self.split,
            "text": self.text,
            "units": None if self.units is None else [list(map(int, u)) for u in self.units],
            "units_estimated": bool(self.units_estimated),
        }


def latent_digest(latents: np.ndarray) -> bytes:
    """sha256 of latent bytes as stored (little-endian, C order)."""
    data = np.ascontiguousarray(latents)
    return hashlib.sha256(data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()).digest()


def segment_hash(latents_digest: bytes, meta: dict[str, Any]) -> bytes:
    """sha256 of one segment: its latent digest and its canonical metadata JSON."""
    meta = {k: v for k, v in meta.items() if k in _HASHED_FIELDS}
    return hashlib.sha256(latents_digest
                          + json.dumps(meta, sort_keys=True, ensure_ascii=False).encode("utf-8")).digest()


def fingerprint_seed(encoder: dict[str, Any], latent_dtype: str) -> str:
    """Fingerprint of an empty store: the encoder and dtype, so equal audio under other settings differs."""
    blob = json.dumps({"format_version": FORMAT_VERSION, "encoder": encoder, "dtype": latent_dtype}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def chain_fingerprint(previous: str, seg_digest: bytes) -> str:
    """Fingerprint after appending a segment: ``sha256(previous || segment hash)``.

    A chain, so a store built in several appends has the same fingerprint as one built
    in one go from the same segments in the same order.
    """
    return hashlib.sha256(bytes.fromhex(previous) + seg_digest).hexdigest()


def encode_strings(values: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(), offsets


def decode_strings(blob: np.ndarray, offsets: np.ndarray) -> list[str]:
    """Strings of a UTF-8 ``blob`` cut at byte ``offsets`` ``[n + 1]``."""
    raw = blob.tobytes()
    bounds = offsets.tolist()
    if not raw or int(blob.max()) < 0x80:  # ASCII: byte offsets are character offsets, decode once
        text = raw.decode("ascii")
        return [text[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    return [raw[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def chunk_file(path: Path, k: int) -> Path:
    """Latent chunk ``k``'s file (zarr v3 default key encoding, one chunk across the channels)."""
    return path / "latents" / "c" / str(k) / "0"
