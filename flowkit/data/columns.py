"""Per-segment string metadata kept as the store holds it: one UTF-8 blob and byte offsets.

A million segments as Python strings cost about 60 bytes of object header each, six
fields deep (segment id, speaker, language, emotion, split, text): hundreds of MB and
seconds to build, before training reads any of it. `StringColumn` keeps the blob
``[bytes]`` uint8 and offsets ``[n + 1]`` int64 and decodes one value when it is asked
for; `categorical` turns a low-cardinality column (speaker, language, split) into a
small table of values and int32 codes ``[n]`` with array operations only, so validation
and grouping never loop over segments in Python. The store's on-disk layout is the same
blob + offsets (`flowkit.data.store`), so a column is read with no conversion.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

#: bytes Python's str.isspace() accepts in ASCII (tab, newline, vt, ff, cr, the file/group/record/unit separators,
#: space)
_ASCII_SPACE = np.zeros(256, dtype=bool)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True


class StringColumn(Sequence[str]):
    """``n`` strings as a UTF-8 ``blob`` cut at byte ``offsets`` ``[n + 1]``; decoded on access."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        self.blob = np.asarray(blob, dtype=np.uint8)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self._bytes = self.blob.tobytes()

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        i = int(index)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"string column index {index} out of range for {n}")
        return self._bytes[self.offsets[i] : self.offsets[i + 1]].decode("utf-8")

    def value(self, i: int) -> str:
        """String ``i`` for ``0 <= i < len(self)``, without the bounds and type checks of
        indexing (the per-item path of batch building)."""
        return self._bytes[self.offsets[i] : self.offsets[i + 1]].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def tolist(self) -> list[str]:
        """Every string, decoded at once (ASCII blobs in one decode)."""
        bounds = self.offsets.tolist()
        if not self._bytes or int(self.blob.max()) < 0x80:
            text = self._bytes.decode("ascii")
            return [text[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        return [self._bytes[a:b].decode("utf-8") for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StringColumn):
            return self._bytes == other._bytes and np.array_equal(self.offsets, other.offsets)
        if isinstance(other, (list, tuple)):
            return self.tolist() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def validate_utf8(self) -> None:
        """Raises UnicodeDecodeError when the blob is not valid UTF-8."""
        self._bytes.decode("utf-8")

    def _ascii(self) -> bool:
        if not hasattr(self, "_is_ascii"):
            self._is_ascii = not self._bytes or int(self.blob.max()) < 0x80
        return self._is_ascii

    def char_lengths(self) -> np.ndarray:
        """Characters (code points) of each string, int64 ``[n]``: its bytes less its UTF-8
        continuation bytes (found with one array scan; none to count in ASCII text)."""
        lengths = np.diff(self.offsets)
        if self._ascii():
            return lengths
        continuation = np.flatnonzero((self.blob & 0xC0) == 0x80)
        before = np.searchsorted(continuation, self.offsets)
        return lengths - np.diff(before)

    def blank(self) -> np.ndarray:
        """bool ``[n]``: strings that are empty or whitespace only (``not s.strip()``).

        Only strings whose first byte could start whitespace (ASCII whitespace, or a lead
        byte of a Unicode space: 0xC2, 0xE1, 0xE2, 0xE3) are decoded and checked; the
        rest start with a visible character.
        """
        n = len(self)
        lengths = np.diff(self.offsets)
        out = lengths == 0
        rows = np.flatnonzero(~out)
        first = self.blob[self.offsets[:-1][rows]]
        maybe = _ASCII_SPACE[first] | np.isin(first, (0xC2, 0xE1, 0xE2, 0xE3))
        for i in rows[maybe].tolist():
            out[i] = not self[i].strip()
        return out if n else np.zeros(0, dtype=bool)


def categorical(column: StringColumn) -> tuple[list[str], np.ndarray]:
    """The distinct values of ``column`` (sorted) and each row's code into them (int32 ``[n]``).

    Values are compared as zero-padded bytes (packed into one uint64 when at most 8 bytes
    long), so the work is array sorting, not a Python loop; meant for short values such as
    speakers, languages and splits. Values differing only by trailing NUL characters
    compare equal (flowkit's fields hold none).
    """
    n = len(column)
    if n == 0:
        return [], np.zeros(0, dtype=np.int32)
    starts = column.offsets[:-1]
    lengths = np.diff(column.offsets)
    width = max(1, int(lengths.max()))
    last = max(0, column.blob.shape[0] - 1)
    blob = column.blob if column.blob.shape[0] else np.zeros(1, dtype=np.uint8)
    # byte j of every value at once (zero past a value's end): `width` array passes, no 2-d gather
    byte = [np.where(j < lengths, blob[np.minimum(starts + j, last)], 0).astype(np.uint8) for j in range(width)]
    if width <= 8:  # the bytes as one big-endian uint64: sorts like the strings
        key = np.zeros(n, dtype=np.uint64)
        for j, b in enumerate(byte):
            key |= b.astype(np.uint64) << np.uint64(8 * (7 - j))
        uniq, first, codes = np.unique(key, return_index=True, return_inverse=True)
        values = [column[int(i)] for i in first.tolist()]
        return values, codes.reshape(n).astype(np.int32)
    # longer values: compared as fixed-width byte strings (a zero byte cannot occur inside
    # flowkit's text fields, so padding never makes two values equal)
    rows = np.stack(byte, axis=1).view(f"S{width}").reshape(n)
    uniq, first, codes = np.unique(rows, return_index=True, return_inverse=True)
    return [column[int(i)] for i in first.tolist()], codes.reshape(n).astype(np.int32)


def ids_in(codes: np.ndarray, values: Sequence[str], allowed: set[str]) -> np.ndarray:
    """bool ``[n]``: rows whose value (``values[codes]``) is in ``allowed``."""
    ok = np.asarray([v in allowed for v in values], dtype=bool)
    return ok[codes] if len(values) else np.zeros(codes.shape[0], dtype=bool)
