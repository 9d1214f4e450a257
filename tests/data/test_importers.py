"""Importers of `flowkit prepare` (LibriTTS, Lhotse, Hugging Face datasets) on real clips.

Each test lays the same bundled recordings out as one input kind, prepares it, and checks
the mapped fields, the rejections with their reasons, and that the latents equal those of
the same clips prepared from a plain flowkit manifest (so the import decodes the audio
exactly as prepare does).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from real_clips import real_clips, write_manifest

from flowkit.data.importers import detect_format
from flowkit.data.store import REJECTIONS_FILE, StoreReader


def _store(path: Path) -> dict[str, dict]:
    reader = StoreReader.open(path)
    out = {}
    for row, sid in enumerate(reader.strings["segment_id"]):
        out[sid] = {"speaker": reader.strings["speaker"][row], "language": reader.strings["language"][row],
                    "text": reader.strings["text"][row], "split": reader.strings["split"][row],
                    "latents": reader.read([row])[0]}
    reader.close()
    return out


def _rejections(path: Path) -> dict[str, str]:
    lines = (path / REJECTIONS_FILE).read_text(encoding="utf-8").splitlines()
    return {r["segment_id"]: r["reason"] for r in map(json.loads, lines)}


@pytest.fixture(scope="module")
def clips():
    return real_clips(6)


@pytest.fixture(scope="module")
def reference(clips, tmp_path_factory):
    """The clips prepared from a flowkit manifest: segment id -> fields and latents."""
    from flowkit.data.prepare import prepare_store

    tmp = tmp_path_factory.mktemp("reference")
    prepare_store([write_manifest(clips, tmp / "m.jsonl")], tmp / "ref.zarr", workers=1, progress=False)
    return _store(tmp / "ref.zarr")


def test_libritts_layout(tmp_path, clips, reference, quiet_prepare):
    root = tmp_path / "LibriTTS_R" / "train-clean-100"
    ids = {}
    for k, clip in enumerate(clips):
        speaker, chapter = str(100 + k % 3), str(2000 + k)
        stem = f"{speaker}_{chapter}_000001_{k:06d}"
        folder = root / speaker / chapter
        folder.mkdir(parents=True, exist_ok=True)
        audio, sr = sf.read(str(clip.path), dtype="float32")
        sf.write(str(folder / f"{stem}.wav"), audio, sr, subtype="FLOAT")  # lossless copy of the FLAC
        (folder / f"{stem}.normalized.txt").write_text(clip.text + "\n", encoding="utf-8")
        (folder / f"{stem}.original.txt").write_text(clip.text.upper(), encoding="utf-8")
        ids[stem] = (clip, speaker)
    (root / "100" / "2000" / "100_2000_000001_999999.normalized.txt").write_text("no audio here", encoding="utf-8")
    stray = root / "100" / "2000" / "notes_x.normalized.txt"
    stray.write_text("a file that is not an utterance", encoding="utf-8")
    sf.write(str(stray.with_name("notes_x.wav")), np.zeros(8000, dtype=np.float32), 16000)

    assert detect_format(tmp_path / "LibriTTS_R") == "libritts"
    summary = quiet_prepare([tmp_path / "LibriTTS_R"], tmp_path / "libritts.zarr")
    got = _store(tmp_path / "libritts.zarr")
    assert summary.accepted == len(clips) and set(got) == set(ids)
    for stem, (clip, speaker) in ids.items():
        seg = got[stem]
        assert (seg["speaker"], seg["language"], seg["text"]) == (speaker, "en", clip.text)  # normalized text
        np.testing.assert_array_equal(seg["latents"], reference[clip.segment_id]["latents"])
    assert _rejections(tmp_path / "libritts.zarr") == {"100_2000_000001_999999": "missing_audio", "notes_x": "bad_path"}


def _lhotse_manifests(clips, folder: Path):
    """Recordings of the clips; supervisions: the first clip cut in two halves, the rest whole."""
    from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet

    recordings, supervisions = [], []
    for k, clip in enumerate(clips):
        rec = Recording.from_file(str(clip.path), recording_id=clip.segment_id)
        recordings.append(rec)
        names = {"en": "English", "fr": "French", "it": "Italian", "ru": "Russian", "es": "Spanish"}
        if k == 0:
            half = round(rec.duration / 2, 3)
            supervisions += [
                SupervisionSegment(f"{clip.segment_id}-a", rec.id, 0.0, half, text="first half", speaker=clip.speaker,
                                   language=names[clip.language]),
                SupervisionSegment(f"{clip.segment_id}-b", rec.id, half, round(rec.duration - half, 3),
                                   text="second half", speaker=clip.speaker, language=names[clip.language],
                                   custom={"emotion": "happy"}),
            ]
        elif k < len(clips) - 1:  # the last recording has no supervision
            supervisions.append(SupervisionSegment(f"{clip.segment_id}-sup", rec.id, 0.0, rec.duration, text=clip.text,
                                                   speaker=clip.speaker, language=names[clip.language]))
    folder.mkdir(parents=True, exist_ok=True)
    RecordingSet.from_recordings(recordings).to_file(folder / "demo_recordings_train.jsonl.gz")
    SupervisionSet.from_segments(supervisions).to_file(folder / "demo_supervisions_train.jsonl.gz")
    return folder / "demo_recordings_train.jsonl.gz"


def test_lhotse_cuts_and_recordings_with_supervisions(tmp_path, clips, reference, quiet_prepare):
    pytest.importorskip("lhotse")
    from lhotse import CutSet, load_manifest

    recordings = _lhotse_manifests(clips, tmp_path / "pair")
    cuts = CutSet.from_manifests(recordings=load_manifest(recordings),
                                 supervisions=load_manifest(tmp_path / "pair" / "demo_supervisions_train.jsonl.gz"))
    (tmp_path / "cutsdir").mkdir()
    cuts.to_file(tmp_path / "cutsdir" / "demo_cuts_train.jsonl.gz")

    for name, source in (("pair", recordings), ("cuts", tmp_path / "cutsdir")):
        assert detect_format(source) == "lhotse"
        summary = quiet_prepare([source], tmp_path / f"{name}.zarr")
        got = _store(tmp_path / f"{name}.zarr")
        first = clips[0].segment_id
        assert {f"{first}-a", f"{first}-b"} <= set(got), name  # one segment per supervision
        assert (got[f"{first}-a"]["text"], got[f"{first}-b"]["text"]) == ("first half", "second half")
        assert summary.accepted == len(clips) - 2 + 2
        for clip in clips[1:-1]:
            seg = got[f"{clip.segment_id}-sup"]  # the supervision id
            assert (seg["speaker"], seg["language"], seg["text"]) == (clip.speaker, clip.language, clip.text)
            # Lhotse decodes the whole clip: the latents equal prepare's own decoding of the file
            np.testing.assert_allclose(seg["latents"], reference[clip.segment_id]["latents"], atol=2e-3)
        half = got[f"{first}-a"]["latents"].shape[0] + got[f"{first}-b"]["latents"].shape[0]
        assert abs(half - reference[first]["latents"].shape[0]) <= 2
        assert list(_rejections(tmp_path / f"{name}.zarr").values()) == ["no_supervision"]


def test_lhotse_missing_recording_is_rejected(tmp_path, clips, quiet_prepare):
    pytest.importorskip("lhotse")
    from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet

    clip = clips[1]
    copy = tmp_path / "audio" / "gone.flac"
    copy.parent.mkdir()
    copy.write_bytes(clip.path.read_bytes())
    rec = Recording.from_file(str(copy), recording_id="gone")
    RecordingSet.from_recordings([rec]).to_file(tmp_path / "x_recordings.jsonl.gz")
    SupervisionSet.from_segments([SupervisionSegment("gone-s", "gone", 0.0, rec.duration, text="x", speaker="s",
                                                     language="en")]).to_file(tmp_path / "x_supervisions.jsonl.gz")
    copy.unlink()
    from flowkit.errors import DataError

    # its only supervision rejected: no store is published, the rejection is written beside it
    with pytest.raises(DataError, match=r"all 1 items .*\(missing_audio 1\); no store was written"):
        quiet_prepare([tmp_path / "x_recordings.jsonl.gz"], tmp_path / "x.zarr")
    assert not (tmp_path / "x.zarr").exists()
    rows = (tmp_path / "x.zarr.rejections.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(r)["reason"] for r in rows] == ["missing_audio"]


def _hf_rows(clips, audio_value):
    return {
        "audio": [audio_value(c) for c in clips],
        "sentence": [c.text for c in clips],
        "client_id": [c.speaker for c in clips],
        "locale": [{"en": "en-US", "fr": "fr-FR", "it": "it", "ru": "ru_RU", "es": "es"}[c.language] for c in clips],
        "id": [c.segment_id for c in clips],
    }


def test_hf_save_to_disk_and_parquet(tmp_path, clips, reference, quiet_prepare):
    datasets = pytest.importorskip("datasets")

    rows = _hf_rows(clips, lambda c: {"bytes": c.path.read_bytes(), "path": c.path.name})
    rows["audio"][-1] = None  # an empty audio value
    ds = datasets.Dataset.from_dict(rows).cast_column("audio", datasets.Audio())
    ds.save_to_disk(str(tmp_path / "saved"))
    (tmp_path / "pq").mkdir()
    ds.to_parquet(str(tmp_path / "pq" / "train-00000.parquet"))
    by_path = datasets.Dataset.from_dict(_hf_rows(clips[:2], lambda c: {"bytes": None, "path": str(c.path)}))
    datasets.DatasetDict({"train": by_path.select([0]), "validation": by_path.select([1])}).save_to_disk(
        str(tmp_path / "dict"))

    for name in ("saved", "pq"):
        assert detect_format(tmp_path / name) == "hf"
        summary = quiet_prepare([tmp_path / name], tmp_path / f"{name}.zarr")
        got = _store(tmp_path / f"{name}.zarr")
        assert summary.accepted == len(clips) - 1, name
        for clip in clips[:-1]:
            seg = got[clip.segment_id]
            assert (seg["speaker"], seg["language"], seg["text"]) == (clip.speaker, clip.language, clip.text)
            np.testing.assert_array_equal(seg["latents"], reference[clip.segment_id]["latents"])
        assert _rejections(tmp_path / f"{name}.zarr") == {clips[-1].segment_id: "missing_audio"}
    quiet_prepare([tmp_path / "dict"], tmp_path / "dict.zarr")
    got = _store(tmp_path / "dict.zarr")
    assert got[clips[1].segment_id]["split"] == "val"  # the DatasetDict's validation split
    np.testing.assert_array_equal(got[clips[0].segment_id]["latents"], reference[clips[0].segment_id]["latents"])


def test_format_flag_and_unknown_input(tmp_path, clips, quiet_prepare):
    from flowkit.errors import DataError

    manifest = write_manifest(clips[:2], tmp_path / "list.jsonl")
    with pytest.raises(DataError, match="--format 'nope': unknown"):
        quiet_prepare([manifest], tmp_path / "a.zarr", input_format="nope")
    with pytest.raises(DataError, match="--format libritts needs the corpus folder"):
        quiet_prepare([manifest], tmp_path / "b.zarr", input_format="libritts")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="not an input flowkit can read"):
        quiet_prepare([tmp_path / "empty"], tmp_path / "c.zarr")
    assert quiet_prepare([manifest], tmp_path / "d.zarr", input_format="manifest").accepted == 2
