"""The bundled demo store ships with the package and holds what quickstart training needs."""

from __future__ import annotations

from collections import Counter

from flowkit.data.dataset import LatentDataset
from flowkit.data.demo import demo_store_path
from flowkit.data.stats import compute_latent_stats
from flowkit.data.store import StoreReader, recompute_fingerprint


def test_demo_store_is_complete_and_balanced():
    path = demo_store_path()
    assert (path.parent / "ATTRIBUTION.md").is_file()
    train = LatentDataset.open([path], "train", require_units=True)
    val = LatentDataset.open([path], "val", require_units=True)
    assert train.report.rejections == [] and val.report.rejections == []
    assert len(train) + len(val) == 150
    assert {s.language for s in train.segments} == {"en", "es", "fr", "it", "ru"}
    per_speaker = Counter(s.speaker for s in val.segments)
    assert set(per_speaker) == {"allison", "june", "carlo", "maxim"} and min(per_speaker.values()) >= 3
    assert all(s.units_estimated for s in train.segments)
    assert train.latent_dim == 80 and train.frame_rate == 100.0 and train.sample_rate == 16000
    assert train.store_attrs["encoder"]["name"] == "log_mel"
    stats = compute_latent_stats(train)
    assert stats.n_frames == int(train.lengths.sum())
    reader = StoreReader.open(path)
    assert recompute_fingerprint(reader) == reader.attrs["fingerprint"]
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    assert size < 10e6
