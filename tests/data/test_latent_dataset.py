"""LatentDataset: per-segment validation, multi-store union, stats and fingerprints."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from synth_audio import write_store

from flowkit.data.dataset import LatentDataset
from flowkit.data.stats import LatentStats, compute_latent_stats
from flowkit.errors import DataError


def _lat(n, dim=4, value=None, seed=0):
    if value is not None:
        return np.full((n, dim), value, np.float16)
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float16)


def test_bad_segments_rejected_with_reasons(tmp_path):
    latents = [_lat(20, seed=1), _lat(20, value=np.nan), _lat(3), _lat(20), _lat(20), _lat(20), _lat(20), _lat(20)]
    texts = ["good one", "nan", "short", "   ", "ok text", "overlap here", "char out", "no units"]
    langs = ["en", "en", "en", "en", "xx", "en", "en", "en"]
    units = [((0, 4, 0, 10), (5, 8, 10, 20)), None, None, None, None,
             ((0, 7, 0, 10), (8, 12, 5, 15)), ((0, 4, 0, 5), (5, 99, 5, 10)), None]
    path = write_store(tmp_path / "s.zarr", latents, texts=texts, languages=langs, units=units)
    ds = LatentDataset.open([path], "train", languages=["en"], max_frames=100)
    reasons = {r.segment_id: r.reason for r in ds.report.rejections}
    assert reasons == {"seg00001": "non_finite", "seg00002": "too_short", "seg00003": "empty_text",
                       "seg00004": "unknown_language", "seg00005": "bad_units", "seg00006": "bad_units"}
    assert [s.segment_id for s in ds.segments] == ["seg00000", "seg00007"]
    assert ds.segments[0].units == ((0, 4, 0, 10), (5, 8, 10, 20))
    assert ds.report.to_dict()["rejected_by_reason"] == {"bad_units": 2, "empty_text": 1, "non_finite": 1,
                                                         "too_short": 1, "unknown_language": 1}
    strict = LatentDataset.open([path], None, languages=["en"], require_units=True)
    assert [s.segment_id for s in strict.segments] == ["seg00000"]
    assert strict.report.counts()["missing_units"] == 1


def test_union_of_stores_and_wrong_dim(tmp_path):
    a = write_store(tmp_path / "a.zarr", [_lat(10, seed=i) for i in range(3)], splits=["train", "val", "train"])
    b = write_store(tmp_path / "b.zarr", [_lat(12, seed=9 + i) for i in range(2)])
    c = write_store(tmp_path / "c.zarr", [_lat(12, dim=6)], dim=6)
    with pytest.raises(DataError, match="mixes encoders: .*4 channels.*6 channels"):
        LatentDataset.open([a, b, c], "train")  # another width is refused, not rejected by segment
    ds = LatentDataset.open([a, b], "train")
    assert [(s.store, s.row) for s in ds.segments] == [(0, 0), (0, 2), (1, 0), (1, 1)]
    assert ds.lengths.tolist() == [10, 10, 12, 12]
    assert ds.report.counts() == {}
    got = ds.read([3, 0, 2])
    np.testing.assert_array_equal(got[0], _lat(12, seed=10).astype(np.float32))
    np.testing.assert_array_equal(got[1], _lat(10, seed=0).astype(np.float32))
    assert ds.latent_dim == 4 and ds.frame_rate == 100.0 and ds.paths[1] == b
    with pytest.raises(DataError, match="no latent store given"):
        LatentDataset.open([], None)


def test_stats_match_numpy_and_round_trip(tmp_path):
    latents = [_lat(n, seed=n) * 3 + 1 for n in (10, 33, 70, 5, 64)]
    path = write_store(tmp_path / "s.zarr", latents, splits=["train"] * 4 + ["val"])
    ds = LatentDataset.open([path], "train", min_frames=1)
    stats = compute_latent_stats(ds)
    allx = np.concatenate([a.astype(np.float64) for a in latents[:4]])  # training split only
    np.testing.assert_allclose(stats.mean, allx.mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats.std, allx.std(0), rtol=1e-10)
    assert stats.n_frames == 118
    again = LatentStats.from_dict(stats.to_dict())
    assert again.allclose(stats, tol=0) and compute_latent_stats(ds).allclose(stats, tol=0)
    x = torch.randn(2, 7, 4)
    assert torch.allclose(stats.denormalize(stats.normalize(x)), x, atol=1e-5)
    y = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    assert stats.normalize(y).dtype == np.float32
    shifted = LatentStats(stats.mean + 1e-3, stats.std, stats.n_frames)
    assert not shifted.allclose(stats, tol=1e-4) and shifted.allclose(stats, tol=1e-2)


def test_fingerprint_is_stable_and_tracks_split_and_data(tmp_path):
    latents = [_lat(10, seed=i) for i in range(4)]
    a = write_store(tmp_path / "a.zarr", latents, splits=["train", "train", "val", "train"])
    b = write_store(tmp_path / "b.zarr", latents, splits=["train", "train", "val", "train"])
    fa = LatentDataset.open([a], "train").fingerprint()
    assert fa == LatentDataset.open([a], "train").fingerprint() == LatentDataset.open([b], "train").fingerprint()
    assert fa != LatentDataset.open([a], "val").fingerprint()
    assert fa != LatentDataset.open([a], "train", min_frames=11).fingerprint()
    changed = [*latents[:3], _lat(10, seed=99)]
    c = write_store(tmp_path / "c.zarr", changed, splits=["train", "train", "val", "train"])
    assert LatentDataset.open([c], "train").fingerprint() != fa


def test_dataset_pickles_by_reopening(tmp_path):
    import pickle

    path = write_store(tmp_path / "s.zarr", [_lat(10, seed=i) for i in range(3)])
    ds = LatentDataset.open([path], None)
    clone = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(clone.read([2])[0], ds.read([2])[0])
    assert clone.fingerprint() == ds.fingerprint()
