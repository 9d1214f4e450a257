"""Versions of a store's unit timings, kept side by side.

``flowkit prepare`` writes the store's first timings (MFA TextGrids, ``aligner.energy``,
or none) into the root arrays (``units``, ``unit_offsets``, ``has_units``,
``units_estimated``); that version is called ``prepare``. ``flowkit align write`` adds a
version of its own under ``timings/<name>/`` (a zarr group with the same four arrays and
a per-segment ``source`` code), and makes it the *active* one. The root attribute
``timings`` records them::

    {"active": "learned",
     "versions": {"learned": {"n_segments": n, "sources": ["", "aligner.learned:RUN@step-N"],
                              "fingerprint": ..., "checksums": {array: crc32}, "created": ...,
                              "estimated": true, ...}}}

A reader (`flowkit.data.store.reader.StoreReader`) serves the active version's timings and
fingerprint in place of the root arrays; the root arrays are never rewritten, so every
older version stays, and ``flowkit align use STORE NAME`` switches back. A version is
written under a temporary name and renamed into place before the root attribute names it:
a kill leaves the store as it was.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowkit.data import checksums
from flowkit.errors import DataError
from flowkit.io import atomic_write_json, fsync_dir

__all__ = ["ATTR", "PREPARE", "Timings", "active_name", "read_active", "use_version", "versions", "write_version"]

ATTR = "timings"
PREPARE = "prepare"  # the timings prepare wrote: the root arrays
FOLDER = "timings"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ARRAYS = ("units", "unit_offsets", "has_units", "units_estimated", "source")


class Timings:
    """One version's arrays: ``units`` int32 ``[u 4]``, ``unit_offsets`` int64 ``[n + 1]``,
    ``has_units`` / ``units_estimated`` bool ``[n]``, ``source`` int16 ``[n]`` (index into
    the version's ``sources``; 0 = no timings)."""

    def __init__(self, units: np.ndarray, unit_offsets: np.ndarray, has_units: np.ndarray,
                 units_estimated: np.ndarray, source: np.ndarray) -> None:
        self.units, self.unit_offsets = units, unit_offsets
        self.has_units, self.units_estimated, self.source = has_units, units_estimated, source

    @classmethod
    def from_segments(cls, per_segment: Sequence[tuple[tuple[int, int, int, int], ...] | None],
                      source: Sequence[int], estimated: Sequence[bool]) -> Timings:
        """Arrays from each segment's units (None: no timings) and its source code."""
        n = len(per_segment)
        counts = np.array([0 if u is None else len(u) for u in per_segment], dtype=np.int64)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        rows = [list(u) for units in per_segment if units for u in units]
        units = np.array(rows, dtype=np.int32).reshape(-1, 4)
        has = np.array([u is not None and len(u) > 0 for u in per_segment], dtype=bool)
        return cls(units, offsets, has, np.asarray(estimated, dtype=bool) & has, np.asarray(source, dtype=np.int16))

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in ARRAYS}


def versions(attrs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The versions a store's root attributes name (``prepare`` is implicit and not listed)."""
    value = attrs.get(ATTR)
    return dict(value.get("versions") or {}) if isinstance(value, dict) else {}


def active_name(attrs: dict[str, Any]) -> str:
    """The name of the timings a reader serves: a version's, or ``prepare``."""
    value = attrs.get(ATTR)
    return str(value.get("active") or PREPARE) if isinstance(value, dict) else PREPARE


def read_active(path: Path, attrs: dict[str, Any], n_segments: int) -> tuple[Timings, dict[str, Any]] | None:
    """The active version's arrays and record, or None when ``prepare``'s are active.

    Raises:
        DataError: the version is missing, damaged (its checksums), or covers another
            number of segments than the store (segments appended after it was written).
    """
    name = active_name(attrs)
    if name == PREPARE:
        return None
    record = versions(attrs).get(name)
    fix = (f"rerun `flowkit align write {path} --run RUN`, "
           f"or serve prepare's timings: `flowkit align use {path} prepare`")
    if record is None:
        raise DataError(f"{path}: the active timings {name!r} are not among its versions; {fix}")
    if int(record.get("n_segments", -1)) != n_segments:
        raise DataError(f"{path}: timings {name!r} cover {record.get('n_segments')} segments of {n_segments} "
                        f"(segments were appended after they were written); {fix}")
    import zarr

    folder = path / FOLDER / name
    try:
        group = zarr.open_group(str(folder), mode="r", zarr_format=3)
        values = {a: np.asarray(group[a][:]) for a in ARRAYS}
    except Exception as exc:
        raise DataError(f"{path}: cannot read timings {name!r} ({type(exc).__name__}: {exc}); {fix}") from None
    for a, crc in (record.get("checksums") or {}).items():
        if checksums.crc32_of(values[a]) != crc:
            raise DataError(f"{path}: timings {name!r} array {a!r} fails its checksum; {fix}")
    timings = Timings(values["units"].astype(np.int32).reshape(-1, 4), values["unit_offsets"].astype(np.int64),
                      values["has_units"].astype(bool), values["units_estimated"].astype(bool),
                      values["source"].astype(np.int16))
    if len(timings.has_units) != n_segments or len(timings.unit_offsets) != n_segments + 1 \
            or int(timings.unit_offsets[-1]) != len(timings.units):
        raise DataError(f"{path}: timings {name!r} have inconsistent lengths; {fix}")
    return timings, record


def _root_meta(path: Path) -> dict[str, Any]:
    return json.loads((path / "zarr.json").read_text(encoding="utf-8"))


def _write_root_attrs(path: Path, meta: dict[str, Any]) -> None:
    atomic_write_json(path / "zarr.json", meta)


def check_name(name: str) -> str:
    """``name`` if it can name a version (letters, digits, ``_ . -``; not ``prepare``).

    Raises:
        DataError: any other name.
    """
    if name == PREPARE or not _NAME.match(name):
        raise DataError(f"timings name {name!r}: use 1-64 letters, digits, '_', '.' or '-' (not 'prepare')")
    return name


def write_version(path: Path, name: str, timings: Timings, sources: Sequence[str], info: dict[str, Any],
                  fingerprint: str, *, activate: bool = True) -> None:
    """Add (or replace) version ``name`` of the store at ``path``, and make it active.

    The arrays go to ``timings/.<name>.partial-<pid>`` and are renamed into place; then the
    root attribute ``timings`` names the version (one atomic write of ``zarr.json``).

    Raises:
        DataError: a bad name; OSError: as the file system reports it (nothing is published).
    """
    import zarr

    check_name(name)
    root = path / FOLDER
    if not (root / "zarr.json").exists():
        zarr.open_group(str(root), mode="w", zarr_format=3)
    partial = root / f".{name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        group = zarr.open_group(str(partial), mode="w", zarr_format=3)
        for a, values in timings.arrays().items():
            group.create_array(a, data=values, chunks=tuple(max(1, n) for n in values.shape))
        fsync_dir(partial)
        final = root / name
        if final.exists():
            trash = root / f".{name}.old-{os.getpid()}"
            os.replace(final, trash)
            os.replace(partial, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(partial, final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    meta = _root_meta(path)
    attrs_ = meta.setdefault("attributes", {})
    record = {**info, "n_segments": len(timings.has_units), "sources": list(sources), "fingerprint": fingerprint,
              "checksums": {a: checksums.crc32_of(v) for a, v in timings.arrays().items()},
              "segments_with_units": int(timings.has_units.sum()), "created": time.time()}
    table = attrs_.get(ATTR) if isinstance(attrs_.get(ATTR), dict) else {}
    table = {"active": table.get("active") or PREPARE, "versions": {**(table.get("versions") or {}), name: record}}
    if activate:
        table["active"] = name
    attrs_[ATTR] = table
    _write_root_attrs(path, meta)


def use_version(path: Path, name: str) -> str:
    """Make version ``name`` (or ``prepare``) the one readers serve; returns the previous one.

    Raises:
        DataError: no such version.
    """
    meta = _root_meta(path)
    attrs_ = meta.setdefault("attributes", {})
    known = versions(attrs_)
    if name != PREPARE and name not in known:
        raise DataError(f"{path} has no timings {name!r}; it has: {', '.join([PREPARE, *known])}")
    previous = active_name(attrs_)
    table = attrs_.get(ATTR) if isinstance(attrs_.get(ATTR), dict) else {"versions": {}}
    attrs_[ATTR] = {**table, "active": name}
    _write_root_attrs(path, meta)
    return previous
