"""Sharded prepare: N deterministic parts whose union is the unsharded store, split included."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from real_clips import real_clips, write_manifest

from flowkit.data.dataset import LatentDataset
from flowkit.data.shards import shard_store_path
from flowkit.data.store import StoreReader, reader_meta
from flowkit.errors import DataError


def _segments(stores: list[Path]) -> dict[str, tuple]:
    """segment id -> (metadata as hashed into the fingerprint, latent bytes) over ``stores``."""
    out: dict[str, tuple] = {}
    for path in stores:
        reader = StoreReader.open(path)
        for row, sid in enumerate(reader.strings["segment_id"]):
            assert sid not in out, f"{sid} in two shards"
            out[sid] = (reader_meta(reader, row), reader.read([row])[0].tobytes())
        reader.close()
    return out


@pytest.fixture(scope="module")
def listing(tmp_path_factory):
    clips = real_clips(24)
    tmp = tmp_path_factory.mktemp("shards")
    manifest = write_manifest(clips, tmp / "clips.jsonl")
    with manifest.open("a", encoding="utf-8") as f:  # a listing rejection and a decode rejection
        f.write(json.dumps({"id": "no-text", "audio": str(clips[0].path), "text": ""}) + "\n")
        f.write('{"id": "no-file", "audio": "missing.flac", "text": "x"}\n')
    return manifest


def test_union_of_shards_equals_the_unsharded_store(tmp_path, listing, quiet_prepare):
    from flowkit.data.prepare import PrepareSettings

    settings = PrepareSettings(val_fraction=0.2, min_val_per_speaker=1)
    whole = quiet_prepare([listing], tmp_path / "whole.zarr", settings=settings)
    reference = _segments([tmp_path / "whole.zarr"])
    assert whole.accepted == 24 and {m["split"] for m, _ in reference.values()} == {"train", "val"}
    for n in (1, 2, 3):
        folder = tmp_path / f"n{n}"
        rejected = {}
        for i in range(n):
            part = quiet_prepare([listing], folder, settings=settings, shard=(i, n))
            assert part.store == shard_store_path(folder, i, n)
            for reason, count in part.rejected.items():
                rejected[reason] = rejected.get(reason, 0) + count
        union = _segments([shard_store_path(folder, i, n) for i in range(n)])
        assert union == reference, n  # segment for segment: latents, text, labels, split
        assert rejected == dict(whole.rejected)
        ds = LatentDataset.open([folder], "val")  # --data DIR: the union of the shards
        assert sorted(s.segment_id for s in ds.segments) == sorted(k for k, (m, _) in reference.items()
                                                                   if m["split"] == "val")
        assert {s.corpus for s in ds.segments} == {0}  # one corpus: speakers pair across shards
    sizes = [StoreReader.open(shard_store_path(tmp_path / "n3", i, 3)).n_segments for i in range(3)]
    assert min(sizes) > 0 and sum(sizes) == 24


def test_shard_reruns_alone_and_incomplete_folders_are_named(tmp_path, listing, quiet_prepare):
    folder = tmp_path / "parts"
    first = quiet_prepare([listing], folder, shard=(0, 2))
    with pytest.raises(DataError, match=r"shard 1/2 is missing or unfinished .*--shard 1/2"):
        LatentDataset.open([folder], "train")
    # shard 1 killed mid-way: its partial folder is replaced by the rerun; shard 0 is left alone
    partial = shard_store_path(folder, 1, 2).with_name(shard_store_path(folder, 1, 2).name + ".partial")
    shutil.copytree(first.store, partial)
    (partial / "flowkit-partial-store").write_text("x")
    with pytest.raises(DataError, match="shard 1/2 is missing"):
        LatentDataset.open([folder], "train")
    mtime = (first.store / "zarr.json").stat().st_mtime_ns
    again = quiet_prepare([listing], folder, shard=(0, 2))
    assert again.skipped and (first.store / "zarr.json").stat().st_mtime_ns == mtime
    second = quiet_prepare([listing], folder, shard=(1, 2))
    assert not second.skipped and not partial.exists()
    assert len(LatentDataset.open([folder], None)) == first.accepted + second.accepted
    quiet_prepare([listing], folder, shard=(0, 3))
    with pytest.raises(DataError, match="shards of 2 and 3 parts are mixed"):
        LatentDataset.open([folder], "train")
    with pytest.raises(DataError, match="--shard and --append"):
        quiet_prepare([listing], folder, shard=(0, 2), append=True)


def test_shard_spec_parsing():
    from flowkit.data.shards import parse_shard, shard_of

    assert parse_shard("3/4") == (3, 4) and parse_shard(" 0 / 1 ") == (0, 1)
    for bad in ("4/4", "1", "a/b", "-1/2", "0/0"):
        with pytest.raises(DataError, match="--shard"):
            parse_shard(bad)
    parts = np.bincount([shard_of(f"utt{i}", 4) for i in range(4000)], minlength=4)
    assert parts.min() > 900  # balanced by the id hash
