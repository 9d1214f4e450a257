"""Importers of `flowkit prepare` on the bad files users have.

Each case is a corpus with one bad utterance beside good ones, laid out as the importer
reads it: the bad one must be one rejection with its reason (in ``rejections.jsonl`` and
the summary) and the good ones must be prepared, never a traceback and never a silent
drop. The clips are the bundled demo recordings (present in every clone).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import soundfile as sf

from flowkit.data.store import REJECTIONS_FILE, StoreReader

#: short clips of the bundled demo recordings: (id, text, speaker, language)
CLIPS = (
    ("allison_en_call-forwarding", "call forwarding"),
    ("allison_en_conf-muted", "you are now muted"),
    ("allison_en_agent-loggedoff", "agent logged off"),
)


def _clip(k: int) -> Path:
    from flowkit.data.demo import demo_clips_path

    return demo_clips_path() / "wavs" / f"{CLIPS[k][0]}.flac"


def _prepare(inputs, out: Path, **kwargs):
    from flowkit.data.prepare import prepare_store

    return prepare_store([Path(p) for p in inputs], out, workers=1, progress=False, **kwargs)


def _rejections(store: Path) -> dict[str, tuple[str, str]]:
    """segment id -> (reason, detail) of a store's rejections file."""
    rows = map(json.loads, (store / REJECTIONS_FILE).read_text(encoding="utf-8").splitlines())
    return {r["segment_id"]: (r["reason"], r["detail"]) for r in rows}


def _store_fields(store: Path, field: str) -> dict[str, str]:
    reader = StoreReader.open(store)
    try:
        return dict(zip(reader.strings["segment_id"], reader.strings[field], strict=True))
    finally:
        reader.close()


def _libritts(root: Path, n: int = 2) -> list[str]:
    """``n`` utterances in LibriTTS's layout (speaker 100, chapter 2000); their stems."""
    folder = root / "100" / "2000"
    folder.mkdir(parents=True, exist_ok=True)
    stems = []
    for k in range(n):
        stem = f"100_2000_000001_{k:06d}"
        audio, sr = sf.read(str(_clip(k)), dtype="float32")
        sf.write(str(folder / f"{stem}.wav"), audio, sr, subtype="FLOAT")
        (folder / f"{stem}.normalized.txt").write_text(CLIPS[k][1], encoding="utf-8")
        stems.append(stem)
    return stems


# ---- LibriTTS -------------------------------------------------------------------


def test_libritts_transcript_that_is_not_utf8_is_one_bad_encoding_rejection(tmp_path):
    # before: UnicodeDecodeError out of read_text aborted the whole prepare
    root = tmp_path / "LibriTTS"
    good, bad = _libritts(root)
    (root / "100" / "2000" / f"{bad}.normalized.txt").write_bytes("na\xefve caf\xe9".encode("latin-1"))
    summary = _prepare([root], tmp_path / "s.zarr")
    assert summary.accepted == 1 and summary.rejected == {"bad_encoding": 1}
    reason, detail = _rejections(tmp_path / "s.zarr")[bad]
    assert reason == "bad_encoding" and "0xef" in detail and "UTF-8" in detail, detail
    assert set(_store_fields(tmp_path / "s.zarr", "text")) == {good}


def test_libritts_wav_without_a_transcript_is_counted_as_a_rejection(tmp_path):
    # before: a .wav with neither .normalized.txt nor .original.txt was silently left out
    root = tmp_path / "LibriTTS"
    good, orphan = _libritts(root)
    (root / "100" / "2000" / f"{orphan}.normalized.txt").unlink()
    summary = _prepare([root], tmp_path / "s.zarr")
    assert summary.accepted == 1 and summary.rejected == {"missing_text": 1}
    reason, detail = _rejections(tmp_path / "s.zarr")[orphan]
    assert reason == "missing_text" and ".normalized.txt" in detail, detail


# ---- Lhotse ---------------------------------------------------------------------


def _lhotse_pair(folder: Path, supervisions) -> Path:
    """A recordings manifest of clip 0 (id ``rec``) and the given supervisions beside it."""
    from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet

    rec = Recording.from_file(str(_clip(0)), recording_id="rec")
    folder.mkdir(parents=True, exist_ok=True)
    RecordingSet.from_recordings([rec]).to_file(folder / "x_recordings.jsonl.gz")
    segs = [SupervisionSegment(sid, rid, start, rec.duration if dur is None else dur, text=text, speaker="allison",
                               language="English") for sid, rid, start, dur, text in supervisions(rec.duration)]
    SupervisionSet.from_segments(segs).to_file(folder / "x_supervisions.jsonl.gz")
    return folder / "x_recordings.jsonl.gz"


def test_lhotse_supervision_past_its_recordings_end_is_rejected(tmp_path):
    # before: AssertionError from lhotse's trim_to_supervisions aborted the whole prepare
    pytest.importorskip("lhotse")

    manifest = _lhotse_pair(tmp_path / "lh", lambda d: [
        ("head", "rec", 0.0, round(d * 0.6, 3), "call"),
        ("past", "rec", 0.2, d + 2.0, "runs two seconds past the end"),
    ])
    summary = _prepare([manifest], tmp_path / "s.zarr")
    assert summary.accepted == 1 and summary.rejected == {"beyond_recording": 1}
    reason, detail = _rejections(tmp_path / "s.zarr")["past"]
    assert reason == "beyond_recording" and "rec" in detail and "s" in detail, detail
    assert set(_store_fields(tmp_path / "s.zarr", "text")) == {"head"}


def test_lhotse_supervision_of_an_unknown_recording_is_counted_as_a_rejection(tmp_path):
    # before: CutSet.from_manifests dropped it without a word
    pytest.importorskip("lhotse")

    manifest = _lhotse_pair(tmp_path / "lh", lambda d: [
        ("whole", "rec", 0.0, None, "call forwarding"),
        ("ghost", "no-such-recording", 0.0, 1.0, "a recording nobody listed"),
    ])
    summary = _prepare([manifest], tmp_path / "s.zarr")
    assert summary.accepted == 1 and summary.rejected == {"unknown_recording": 1}
    reason, detail = _rejections(tmp_path / "s.zarr")["ghost"]
    assert reason == "unknown_recording" and "no-such-recording" in detail, detail


# ---- language codes: one normalisation for every source ---------------------------


def test_language_forms_map_alike_in_every_source_and_unknown_ones_list_the_accepted_forms(tmp_path):
    # before: EN, en-US and English were unknown_language in metadata.csv and manifests,
    # although the Hugging Face and Lhotse importers mapped the same forms to "en"
    pytest.importorskip("lhotse")
    meta = tmp_path / "meta"
    (meta / "wavs").mkdir(parents=True)
    rows = [("m-upper", "EN"), ("m-locale", "en-US"), ("m-name", "English"), ("m-bad", "Klingon")]
    for sid, _ in rows:
        (meta / "wavs" / f"{sid}.flac").write_bytes(_clip(1).read_bytes())
    (meta / "metadata.csv").write_text("".join(f"{sid}|you are now muted|allison|{lang}\n" for sid, lang in rows),
                                       encoding="utf-8")
    manifest = tmp_path / "list.jsonl"
    entries = [("j-upper", "EN"), ("j-locale", "pt_BR"), ("j-name", "french"), ("j-three", "deu")]
    manifest.write_text("".join(json.dumps({"audio": str(_clip(2)), "id": sid, "text": "agent logged off",
                                            "speaker": "allison", "language": lang}) + "\n"
                                for sid, lang in entries), encoding="utf-8")
    lhotse = _lhotse_pair(tmp_path / "lh", lambda d: [("l-name", "rec", 0.0, None, "call forwarding")])
    libri = tmp_path / "LibriTTS"
    _libritts(libri, 1)

    summary = _prepare([meta, manifest, lhotse], tmp_path / "s.zarr")
    languages = _store_fields(tmp_path / "s.zarr", "language")
    assert languages == {"m-upper": "en", "m-locale": "en", "m-name": "en", "j-upper": "en", "j-locale": "pt",
                         "j-name": "fr", "j-three": "de", "l-name": "en"}
    assert summary.rejected == {"unknown_language": 1}
    reason, detail = _rejections(tmp_path / "s.zarr")["m-bad"]
    assert reason == "unknown_language" and "'Klingon'" in detail
    for form in ("en-US", "English", "eng", "prepare.languages"):  # the accepted forms, and the way to admit one
        assert form in detail, detail

    # a default language given in another form is normalised the same way (LibriTTS has no language field)
    from flowkit.data.prepare import PrepareSettings

    _prepare([libri], tmp_path / "l.zarr", settings=PrepareSettings(default_language="English"))
    assert set(_store_fields(tmp_path / "l.zarr", "language").values()) == {"en"}
    # and so is an allow-list: prepare.languages = ["EN"] admits "en-US"
    _prepare([meta], tmp_path / "a.zarr", settings=PrepareSettings(languages=("EN",)))
    assert set(_store_fields(tmp_path / "a.zarr", "language")) == {"m-upper", "m-locale", "m-name"}
