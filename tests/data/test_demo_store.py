"""The bundled demo store ships with the package and holds what quickstart training needs."""

from __future__ import annotations

from collections import Counter

from flowkit.data.dataset import LatentDataset
from flowkit.data.demo import demo_clips_path, demo_prepare_settings, demo_store_path
from flowkit.data.stats import compute_latent_stats
from flowkit.data.store import StoreReader, recompute_fingerprint, verify_store


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
    assert verify_store(reader) == 3  # every latent chunk carries its checksum
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    assert size < 10e6


def test_demo_clips_are_the_recordings_of_the_demo_store():
    """flowkit/demo/clips ships real prepare input with every clone: the demo store's own clips."""
    import soundfile as sf

    clips = demo_clips_path()
    assert "CC-BY-SA-3.0" in (clips / "ATTRIBUTION.md").read_text(encoding="utf-8")
    rows = [line.split("|") for line in (clips / "metadata.csv").read_text(encoding="utf-8").splitlines()]
    assert all(len(r) == 4 and r[1].strip() for r in rows)
    ids = [r[0] for r in rows]
    assert sorted(p.stem for p in (clips / "wavs").iterdir()) == sorted(ids)
    assert {r[2] for r in rows} == {"allison", "june", "carlo", "maxim"}
    assert {r[3] for r in rows} == {"en", "es", "fr", "it", "ru"}
    reader = StoreReader.open(demo_store_path())
    assert list(reader.strings["segment_id"]) == ids
    assert list(reader.strings["text"]) == [r[1] for r in rows]
    info = sf.info(str(clips / "wavs" / f"{ids[0]}.flac"))
    assert info.samplerate == 16000 and info.channels == 1
    size = sum(p.stat().st_size for p in clips.rglob("*") if p.is_file())
    assert size < 6e6


def test_demo_clips_prepare_into_a_trainable_store(tmp_path, demo_clips):
    """The first step of README's everyday commands, on the bundled clips (12 of them)."""
    from flowkit.data.prepare import prepare_store

    some = tmp_path / "some"
    (some / "wavs").mkdir(parents=True)
    lines = (demo_clips / "metadata.csv").read_text(encoding="utf-8").splitlines()[::13]
    (some / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for line in lines:
        name = line.split("|")[0] + ".flac"
        (some / "wavs" / name).symlink_to(demo_clips / "wavs" / name)
    summary = prepare_store([some], tmp_path / "s.zarr", settings=demo_prepare_settings(), progress=False)
    assert summary.accepted == len(lines) and not summary.rejected
    ds = LatentDataset.open([tmp_path / "s.zarr"], "train", require_units=True)
    assert len(ds) > 0 and all(s.units_estimated for s in ds.segments)
