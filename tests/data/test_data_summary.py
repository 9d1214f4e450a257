"""`flowkit data` / `prepare --summary`: counts per speaker and language, rejections by reason."""

from __future__ import annotations

import json
from collections import Counter

from real_clips import real_clips, write_manifest
from typer.testing import CliRunner

from flowkit.data.store import StoreReader
from flowkit.data.summary import summarize


def test_summary_counts_what_the_store_holds(tmp_path, quiet_prepare):
    clips = real_clips(10)
    manifest = write_manifest(clips, tmp_path / "m.jsonl")
    with manifest.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "x", "audio": "gone.flac", "text": "t"}) + "\n")
        f.write(json.dumps({"id": "y", "audio": str(clips[0].path), "text": ""}) + "\n")
    folder = tmp_path / "parts"
    for i in range(2):
        quiet_prepare([manifest], folder, shard=(i, 2))
    summary = summarize([folder])
    readers = [StoreReader.open(p) for p in sorted(folder.glob("*.zarr"))]
    speakers = Counter(s for r in readers for s in r.strings["speaker"])
    assert {k: v.segments for k, v in summary.speakers.items()} == dict(speakers)
    assert {k: v.segments for k, v in summary.languages.items()} == dict(Counter(c.language for c in clips))
    seconds = sum(float(r.lengths.sum()) / r.frame_rate for r in readers)
    assert abs(summary.total.hours - seconds / 3600) < 1e-9
    assert summary.total.train + summary.total.val == 10 and summary.total.val >= 1
    assert summary.total.rate.sum() == 10 and summary.total.loudness.sum() == 10
    assert dict(summary.rejections) == {"missing_audio": 1, "missing_text": 1}

    from flowkit.cli.app import app

    result = CliRunner().invoke(app, ["data", str(folder)])
    assert result.exit_code == 0, result.output
    assert "per speaker" in result.output and "missing_audio 1" in result.output
    for speaker in speakers:
        assert speaker in result.output
    result = CliRunner().invoke(app, ["data", str(folder), "--json"])
    assert json.loads(result.output)["total"]["segments"] == 10
    result = CliRunner().invoke(app, ["data", str(tmp_path / "nope.zarr")])
    assert result.exit_code == 3 and "no such store" in result.output


def test_prepare_cli_shard_and_summary(tmp_path):
    from flowkit.cli.app import app

    manifest = write_manifest(real_clips(3), tmp_path / "m.jsonl")
    args = ["prepare", str(manifest), "--out", str(tmp_path / "parts"), "--shard", "0/1", "--summary", "--quiet",
            "--workers", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "per language" in result.output and (tmp_path / "parts" / "shard-00000-of-00001.zarr").is_dir()
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "already complete" in again.output
    bad = CliRunner().invoke(app, ["prepare", str(manifest), "--out", str(tmp_path / "x"), "--shard", "2/2"])
    assert bad.exit_code == 3 and "INDEX must be in 0..COUNT-1" in bad.output
