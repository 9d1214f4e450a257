"""prepare: bad input of every kind is skipped with its reason while the good items land."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf
from synth_audio import SR, speechlike, write_clip

from flowkit.data.dataset import LatentDataset
from flowkit.data.prepare import PrepareSettings
from flowkit.data.store import REJECTIONS_FILE, StoreReader


def _bad_corpus(root: Path) -> dict[str, str]:
    """A metadata.csv mixing good clips with one of each bad kind; returns id -> expected reason."""
    wavs = root / "wavs"
    expected = {}
    lines = []

    def add(seg: str, text: str = "some words here", lang: str = "en", reason: str | None = None) -> None:
        lines.append(f"{seg}|{text}|spk|{lang}")
        if reason:
            expected[seg] = reason

    for i in range(3):
        write_clip(wavs / f"good{i}.wav", speechlike(1.0, seed=i))
        add(f"good{i}")
    # stereo 44.1 kHz flac: mixed down and resampled, accepted
    stereo = np.stack([speechlike(1.2, 7, sr=44100), speechlike(1.2, 8, sr=44100)], axis=1)
    sf.write(str(wavs / "stereo.flac"), stereo, 44100)
    add("stereo")
    (wavs / "garbage.wav").write_bytes(b"RIFF not really a wave file" * 10)
    add("garbage", reason="unreadable")
    write_clip(wavs / "trunc.flac", speechlike(2.0, 3))
    data = (wavs / "trunc.flac").read_bytes()
    (wavs / "trunc.flac").write_bytes(data[: len(data) // 3])
    add("trunc", reason="unreadable")
    sf.write(str(wavs / "empty.wav"), np.zeros(0, np.float32), SR)
    add("empty", reason="empty")
    write_clip(wavs / "silent.wav", (np.random.default_rng(0).standard_normal(SR * 2) * 1e-4).astype(np.float32))
    add("silent", reason="silent")
    write_clip(wavs / "short.wav", speechlike(0.1, 4, pad=0.01))
    add("short", reason="too_short")
    write_clip(wavs / "long.wav", speechlike(4.0, 5))
    add("long", reason="too_long")
    write_clip(wavs / "notext.wav", speechlike(1.0, 6))
    add("notext", text="  ", reason="missing_text")
    write_clip(wavs / "badlang.wav", speechlike(1.0, 9))
    add("badlang", lang="klingon", reason="unknown_language")  # "english" is mapped to "en" (labels.language_code)
    add("noaudio", reason="missing_audio")
    lines.append("badcols|only two columns")
    expected["badcols"] = "bad_columns"
    (root / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return expected


def test_each_bad_input_is_rejected_with_its_reason(tmp_path, quiet_prepare):
    expected = _bad_corpus(tmp_path / "in")
    out = tmp_path / "s.zarr"
    summary = quiet_prepare([tmp_path / "in"], out, settings=PrepareSettings(max_seconds=3.0))
    rows = [json.loads(x) for x in (out / REJECTIONS_FILE).read_text().splitlines()]
    got = {r["segment_id"]: r["reason"] for r in rows}
    assert got == expected, got
    assert all(r["detail"] and r["source"] for r in rows)
    assert summary.accepted == 4
    assert sum(summary.rejected.values()) == len(expected)
    reader = StoreReader.open(out)
    assert sorted(reader.strings["segment_id"]) == ["good0", "good1", "good2", "stereo"]
    stereo_row = reader.strings["segment_id"].index("stereo")
    # 1.2 s at 16 kHz after resampling from 44.1 kHz -> 1 + 19200 // 160 frames
    assert reader.lengths[stereo_row] == 1 + int(1.2 * SR) // 160


def test_manifest_jsonl_fields_and_explicit_split(tmp_path, quiet_prepare):
    root = tmp_path / "m"
    records = []
    for i in range(4):
        write_clip(root / "audio" / f"c{i}.wav", speechlike(1.0, seed=i))
        records.append({"audio": f"audio/c{i}.wav", "text": f"clip {i}", "speaker": "s1", "language": "de",
                        "emotion": "happy" if i % 2 else "", "intensity": 0.5 if i % 2 else None,
                        "split": "val" if i == 0 else "train"})
    records.append({"audio": "audio/c1.wav", "id": "bademo", "text": "x", "emotion": "bored"})
    records.append({"audio": "audio/c1.wav", "id": "badint", "text": "x", "intensity": 3})
    lines = [json.dumps(r) for r in records] + ["{not json"]
    (root / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    summary = quiet_prepare([root / "manifest.jsonl"], tmp_path / "m.zarr")
    assert summary.accepted == 4
    assert dict(summary.rejected) == {"unknown_emotion": 1, "bad_intensity": 1, "bad_line": 1}
    ds = LatentDataset.open([tmp_path / "m.zarr"], None)
    by_id = {s.segment_id: s for s in ds.segments}
    assert by_id["c0"].split == "val" and by_id["c1"].split == "train"
    assert by_id["c1"].emotion == "happy" and by_id["c1"].intensity == 0.5
    assert by_id["c2"].emotion == "" and np.isnan(by_id["c2"].intensity)
    assert by_id["c3"].language == "de" and by_id["c3"].speaker == "s1"
    assert all(1 <= s.rate <= 5 and 1 <= s.loudness <= 5 for s in ds.segments)


def test_csv_manifest_and_ljspeech_layout(tmp_path, quiet_prepare):
    root = tmp_path / "lj"
    for i in range(2):
        write_clip(root / "wavs" / f"LJ{i}.wav", speechlike(1.0, seed=i))
    (root / "metadata.csv").write_text("LJ0|Dr. Smith 1|Doctor Smith one\nLJ1|two|two\n")
    quiet_prepare([root], tmp_path / "lj.zarr", settings=PrepareSettings(default_language="en"))
    ds = LatentDataset.open([tmp_path / "lj.zarr"], None)
    assert [s.text for s in ds.segments] == ["Doctor Smith one", "two"]  # normalized_text wins
    assert {s.speaker for s in ds.segments} == {"lj"}  # the folder name
    csv_root = tmp_path / "c"
    write_clip(csv_root / "a.wav", speechlike(1.0, seed=3))
    (csv_root / "m.csv").write_text("audio,text,speaker,language\na.wav,hi there,zed,fr\n")
    quiet_prepare([csv_root / "m.csv"], tmp_path / "c.zarr")
    ds = LatentDataset.open([tmp_path / "c.zarr"], None)
    assert (ds.segments[0].segment_id, ds.segments[0].speaker, ds.segments[0].language) == ("a", "zed", "fr")


def test_validation_split_is_deterministic_with_one_per_speaker(tmp_path, quiet_prepare, small_corpus):
    a = quiet_prepare([small_corpus], tmp_path / "a.zarr", settings=PrepareSettings(val_fraction=0.0))
    b = quiet_prepare([small_corpus], tmp_path / "b.zarr", settings=PrepareSettings(val_fraction=0.0))
    assert a.fingerprint == b.fingerprint
    val = LatentDataset.open([tmp_path / "a.zarr"], "val")
    assert sorted(s.speaker for s in val.segments) == ["ann", "bob"]
    assert len(LatentDataset.open([tmp_path / "a.zarr"], "train")) == 4


def test_existing_store_without_append_is_refused(tmp_path, quiet_prepare, small_corpus):
    import pytest

    from flowkit.errors import DataError

    quiet_prepare([small_corpus], tmp_path / "s.zarr")
    with pytest.raises(DataError, match="already exists; pass --append"):
        quiet_prepare([small_corpus], tmp_path / "s.zarr")


def test_bindings_reach_prepare_and_encoder(tmp_path, quiet_prepare, small_corpus):
    import gin

    from flowkit.data.prepare import PrepareSettings as Settings
    from flowkit.registry import get

    gin.parse_config(["prepare.max_seconds = 1.05", "encoder.log_mel.n_mels = 40"])
    settings = Settings()
    assert settings.max_seconds == 1.05
    enc = get("encoder", "log_mel").obj()
    import attrs

    summary = quiet_prepare([small_corpus], tmp_path / "s.zarr", settings=attrs.evolve(settings, encoder=enc))
    assert summary.rejected["too_long"] == 4
    reader = StoreReader.open(tmp_path / "s.zarr")
    assert reader.latent_dim == 40 and reader.attrs["encoder"]["params"]["n_mels"] == 40
