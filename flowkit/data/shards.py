"""Sharded prepare: a corpus cut into N deterministic parts, each its own store in one folder.

``flowkit prepare INPUT --out DIR --shard i/N`` (``i`` from 0) keeps the segments whose
`shard_of` is ``i`` and writes them to ``DIR/shard-<i>-of-<N>.zarr``: N machines (a SLURM
array, Ray tasks, ...) run the N commands with no coordination, since each reads the
whole listing (cheap: metadata only) and decodes only its own part. The part of a segment
is a hash of its id, so it does not depend on input order or on which machine runs it; the
validation split is planned from the whole listing (`flowkit.data.prepare.plan_splits`), so
it is the same whatever N is. A shard whose store is complete is skipped on a rerun, and
an interrupted one re-runs alone (its ``.partial`` folder is replaced).

``--data DIR`` (training) and `expand_stores` read a shard folder as the union of its
stores, after checking that all N are there and complete.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

from flowkit.errors import DataError

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_NAME = re.compile(r"^shard-(\d+)-of-(\d+)\.zarr$")
_PARTIAL = re.compile(r"^shard-(\d+)-of-(\d+)\.zarr\.partial$")


def parse_shard(spec: str) -> tuple[int, int]:
    """``"i/N"`` -> ``(i, N)`` with ``0 <= i < N``.

    Raises:
        DataError: not of that form, or ``i`` out of range.
    """
    match = _SPEC.match(spec)
    if not match:
        raise DataError(f"--shard {spec!r}: write INDEX/COUNT with INDEX from 0, e.g. --shard 0/4 "
                        "(in a SLURM array: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 0 <= index < count:
        raise DataError(f"--shard {spec!r}: INDEX must be in 0..COUNT-1 and COUNT >= 1")
    return index, count


def shard_of(segment_id: str, count: int) -> int:
    """The part (0..count-1) of ``segment_id``: sha256 of the id, so order and machine do not matter."""
    digest = hashlib.sha256(b"flowkit-shard\0" + segment_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def shard_store_path(folder: Path, index: int, count: int) -> Path:
    """``folder/shard-<index>-of-<count>.zarr`` (five digits each, so names sort by index)."""
    return Path(folder) / f"shard-{index:05d}-of-{count:05d}.zarr"


def is_shard_folder(path: Path) -> bool:
    """A folder that is not itself a store but holds shard stores (complete or not)."""
    path = Path(path)
    if not path.is_dir() or (path / "zarr.json").is_file():
        return False
    return any(_NAME.match(p.name) or _PARTIAL.match(p.name) for p in path.iterdir())


def shard_stores(folder: Path) -> list[Path]:
    """The N shard stores of ``folder`` in index order.

    Raises:
        DataError: shards of different counts, or a shard missing or unfinished (the
            message names it and the command that finishes it).
    """
    folder = Path(folder)
    found: dict[int, set[int]] = {}
    for p in folder.iterdir():
        match = _NAME.match(p.name)
        if match and (p / "zarr.json").is_file():
            found.setdefault(int(match.group(2)), set()).add(int(match.group(1)))
    partial = sorted(p.name for p in folder.iterdir() if _PARTIAL.match(p.name))
    counts = sorted(found) or sorted({int(_PARTIAL.match(n).group(2)) for n in partial})  # type: ignore[union-attr]
    if len(counts) > 1:
        raise DataError(f"{folder}: shards of {' and '.join(map(str, counts))} parts are mixed; "
                        "keep the shards of one --shard i/N run in a folder")
    count = counts[0]
    missing = [i for i in range(count) if i not in found.get(count, set())]
    if missing:
        raise DataError(f"{folder}: shard {missing[0]}/{count} is missing or unfinished ({len(missing)} of {count}); "
                        f"rerun `flowkit prepare ... --out {folder} --shard {missing[0]}/{count}`")
    return [shard_store_path(folder, i, count) for i in range(count)]


def expand_stores(paths: Sequence[str | Path]) -> tuple[list[Path], list[int]]:
    """Stores of ``paths`` with each shard folder replaced by its shard stores.

    Returns the store paths and, for each, the index of the path it came from (its
    *corpus*: the shards of one folder are one corpus, e.g. for grouping speakers).

    Raises:
        DataError: a shard folder that is incomplete (see `shard_stores`).
    """
    stores: list[Path] = []
    corpus: list[int] = []
    for k, raw in enumerate(paths):
        path = Path(raw)
        found = shard_stores(path) if is_shard_folder(path) else [path]
        stores += found
        corpus += [k] * len(found)
    return stores, corpus
