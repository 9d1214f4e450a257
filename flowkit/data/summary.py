"""What a user checks before spending GPU hours: the contents of one or more stores.

`summarize` counts, per speaker and per language, the segments, the hours of audio, the
train/val split and the speaking-rate and loudness buckets (`flowkit.data.labels`:
0 unknown, 1..5 slow..fast / quiet..loud), and the prepare rejections by reason (from each
store's ``rejections.jsonl``). A shard folder counts as the union of its shards.
``flowkit data STORE...`` and ``flowkit prepare ... --summary`` print it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from flowkit.data.labels import N_LOUDNESS_BUCKETS, N_RATE_BUCKETS
from flowkit.data.shards import expand_stores
from flowkit.data.store import REJECTIONS_FILE, StoreReader


@attrs.define
class GroupCounts:
    """Counts of one speaker or language: ``rate``/``loudness`` are ``[6]`` (bucket 0 unknown, 1..5)."""

    segments: int = 0
    hours: float = 0.0
    train: int = 0
    val: int = 0
    rate: np.ndarray = attrs.Factory(lambda: np.zeros(N_RATE_BUCKETS + 1, dtype=np.int64))
    loudness: np.ndarray = attrs.Factory(lambda: np.zeros(N_LOUDNESS_BUCKETS + 1, dtype=np.int64))

    def to_dict(self) -> dict[str, Any]:
        return {"segments": self.segments, "hours": round(self.hours, 6), "train": self.train, "val": self.val,
                "rate": self.rate.tolist(), "loudness": self.loudness.tolist()}


@attrs.define
class DataSummary:
    """Totals and per-speaker / per-language counts of some stores, and their rejections."""

    stores: list[str]
    total: GroupCounts = attrs.Factory(GroupCounts)
    speakers: dict[str, GroupCounts] = attrs.Factory(dict)
    languages: dict[str, GroupCounts] = attrs.Factory(dict)
    rejections: Counter = attrs.Factory(Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"stores": self.stores, "total": self.total.to_dict(),
                "speakers": {k: v.to_dict() for k, v in sorted(self.speakers.items())},
                "languages": {k: v.to_dict() for k, v in sorted(self.languages.items())},
                "rejections": dict(sorted(self.rejections.items()))}


def _add(groups: dict[str, GroupCounts], keys: np.ndarray, names: Sequence[str], seconds: np.ndarray,
         val: np.ndarray, rate: np.ndarray, loudness: np.ndarray) -> None:
    for k, name in enumerate(names):
        rows = keys == k
        g = groups.setdefault(name, GroupCounts())
        n = int(rows.sum())
        g.segments += n
        g.hours += float(seconds[rows].sum()) / 3600
        g.val += int(val[rows].sum())
        g.train += n - int(val[rows].sum())
        g.rate += np.bincount(rate[rows], minlength=N_RATE_BUCKETS + 1)[: N_RATE_BUCKETS + 1]
        g.loudness += np.bincount(loudness[rows], minlength=N_LOUDNESS_BUCKETS + 1)[: N_LOUDNESS_BUCKETS + 1]


def summarize(paths: Sequence[str | Path]) -> DataSummary:
    """The summary of ``paths`` (stores or shard folders).

    Raises:
        DataError: a path that is not a complete store (see `StoreReader.open`) or an
            incomplete shard folder.
    """
    stores, _ = expand_stores(paths)
    out = DataSummary([str(p) for p in stores])
    for path in stores:
        reader = StoreReader.open(path)
        try:
            seconds = reader.lengths / reader.frame_rate
            val = np.asarray([s == "val" for s in reader.strings["split"]], dtype=bool)
            rate = np.clip(reader.numeric["rate"].astype(np.int64), 0, N_RATE_BUCKETS)
            loud = np.clip(reader.numeric["loudness"].astype(np.int64), 0, N_LOUDNESS_BUCKETS)
            everyone = np.zeros(reader.n_segments, dtype=np.int64)
            _add({"": out.total}, everyone, [""], seconds, val, rate, loud)
            for field, groups in (("speaker", out.speakers), ("language", out.languages)):
                names, keys = np.unique(np.asarray(list(reader.strings[field]), dtype=object).astype(str),
                                        return_inverse=True)
                _add(groups, keys.reshape(-1), [n or "(unknown)" for n in names.tolist()], seconds, val, rate, loud)
        finally:
            reader.close()
        rejected = Path(path) / REJECTIONS_FILE
        if rejected.is_file():
            for line in rejected.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    try:
                        out.rejections[json.loads(line).get("reason", "?")] += 1
                    except ValueError:
                        out.rejections["(unreadable line)"] += 1
    return out
