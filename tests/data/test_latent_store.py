"""The store format: round trips, the fast read path against zarr's API, bad stores, append."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synth_audio import write_store

from flowkit.data.store import SegmentRecord, StoreReader, StoreWriter, recompute_fingerprint
from flowkit.errors import DataError


def _random_latents(rng, lengths, dim=5):
    return [rng.standard_normal((n, dim)).astype(np.float16) for n in lengths]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lengths=st.lists(st.integers(1, 150), min_size=1, max_size=12),
    chunk=st.sampled_from([7, 32, 1000]),
    dtype=st.sampled_from(["float16", "float32"]),
    seed=st.integers(0, 2**16),
)
def test_round_trip_is_bit_identical(tmp_path_factory, lengths, chunk, dtype, seed):
    rng = np.random.default_rng(seed)
    latents = [a.astype(dtype) for a in _random_latents(rng, lengths)]
    path = write_store(tmp_path_factory.mktemp("rt") / "s.zarr", latents, chunk_frames=chunk, dtype=dtype)
    reader = StoreReader.open(path)
    order = list(rng.permutation(len(lengths)))
    for i, got in zip(order, reader.read(order), strict=True):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, latents[i].astype(np.float32))
        zarr_api = np.asarray(reader._latents[reader.offsets[i] : reader.offsets[i + 1]])
        np.testing.assert_array_equal(zarr_api, latents[i])  # zarr's API agrees
    assert reader.strings["text"][0] == "text 0 é"
    assert recompute_fingerprint(reader) == reader.attrs["fingerprint"]


def test_fast_path_equals_zarr_api_on_whole_array(tmp_path):
    rng = np.random.default_rng(0)
    latents = _random_latents(rng, [50, 3, 120, 64, 1, 77], dim=8)
    path = write_store(tmp_path / "s.zarr", latents, chunk_frames=64)
    reader = StoreReader.open(path)
    via_zarr = zarr.open_group(str(path), mode="r")["latents"][:]
    fast = reader._read_rows(0, reader.attrs["total_frames"])
    assert fast.tobytes() == via_zarr.tobytes()
    # duplicates and neighbours coalesced into one read still come back in the given order
    got = reader.read([2, 2, 1, 0, 5], gap_frames=10_000)
    for i, g in zip([2, 2, 1, 0, 5], got, strict=True):
        np.testing.assert_array_equal(g, latents[i].astype(np.float32))


def _damage(path, name, mutate):
    meta = path / name / "zarr.json" if name else path / "zarr.json"
    doc = json.loads(meta.read_text())
    mutate(doc)
    meta.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda p: shutil.rmtree(p / "speaker"), "missing array 'speaker'"),
        (lambda p: _damage(p, "", lambda d: d["attributes"].update(format_version=2)), "format version 2 is newer"),
        (lambda p: _damage(p, "", lambda d: d["attributes"].update(complete=False)), "incomplete store"),
        (lambda p: _damage(p, "", lambda d: d["attributes"].update(n_segments=9)), "metadata length mismatch"),
        (lambda p: _damage(p, "", lambda d: d["attributes"].pop("flowkit_format")), "not a flowkit latent store"),
        (lambda p: (p / "zarr.json").unlink(), "not a zarr v3 store"),
    ],
)
def test_bad_stores_are_refused_with_one_line(tmp_path, damage, message):
    path = write_store(tmp_path / "s.zarr", _random_latents(np.random.default_rng(1), [10, 12, 9]))
    damage(path)
    with pytest.raises(DataError, match=message) as info:
        StoreReader.open(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_offsets_not_monotonic_and_wrong_dtype(tmp_path):
    path = write_store(tmp_path / "s.zarr", _random_latents(np.random.default_rng(1), [10, 12, 9]))
    group = zarr.open_group(str(path), mode="r+")
    group["offsets"][2] = 3
    with pytest.raises(DataError, match="'offsets' is not monotonic"):
        StoreReader.open(path)
    path2 = write_store(tmp_path / "t.zarr", _random_latents(np.random.default_rng(1), [10, 12]))
    group = zarr.open_group(str(path2), mode="r+")
    del group["rate"]
    group.create_array("rate", shape=(2,), dtype="float64")
    with pytest.raises(DataError, match="'rate' has dtype float64, expected int8"):
        StoreReader.open(path2)


def test_missing_path_and_partial_are_refused(tmp_path):
    with pytest.raises(DataError, match="no such store"):
        StoreReader.open(tmp_path / "typo.zarr")
    assert not (tmp_path / "typo.zarr").exists()  # opening never creates (zarr #3364)
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(DataError, match="not a zarr v3 store"):
        StoreReader.open(tmp_path / "x.txt")
    writer = StoreWriter.create(tmp_path / "p.zarr", encoder_name="t", encoder_params={}, frame_rate=100,
                                sample_rate=16000, latent_dim=3)
    writer.add(SegmentRecord("a", "s", "en", "", math.nan, 1, 1, "train", "t", np.zeros((4, 3))))
    with pytest.raises(DataError, match="incomplete store left by an interrupted prepare"):
        StoreReader.open(tmp_path / "p.zarr.partial")
    with pytest.raises(DataError, match="no such store"):
        StoreReader.open(tmp_path / "p.zarr")


def test_append_commits_last_and_matches_one_go_fingerprint(tmp_path):
    rng = np.random.default_rng(3)
    latents = _random_latents(rng, [30, 40, 50, 20, 70])
    one_go = write_store(tmp_path / "one.zarr", latents, chunk_frames=64)
    path = write_store(tmp_path / "two.zarr", latents[:2], chunk_frames=64)
    # an append that dies before commit: arrays grow, the committed count does not
    writer = StoreWriter.append_to(path)
    writer.add(SegmentRecord("junk", "s", "en", "", math.nan, 1, 1, "train", "t", np.ones((99, 5))))
    writer._flush_latents()
    del writer
    reader = StoreReader.open(path)
    assert reader.n_segments == 2 and reader.read([1])[0].shape == (40, 5)
    # a real append then lands exactly where the committed data ends
    writer = StoreWriter.append_to(path)
    for i in range(2, 5):
        writer.add(SegmentRecord(f"seg{i:05d}", f"spk{i % 3}", "en", "", math.nan, 1 + i % 5, 1 + (i * 2) % 5,
                                 "train", f"text {i} é", latents[i]))
    writer.commit()
    a, b = StoreReader.open(one_go), StoreReader.open(path)
    assert a.attrs["fingerprint"] == b.attrs["fingerprint"]
    for i in range(5):
        np.testing.assert_array_equal(b.read([i])[0], latents[i].astype(np.float32))
    assert recompute_fingerprint(b) == b.attrs["fingerprint"]
