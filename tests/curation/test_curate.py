"""flowkit curate as a whole: the lists it writes, a killed run continued to the same list,
prepare honouring the keep list, the command line. Cheap criteria only (no judge): the
judges' own criteria are tested in test_criteria.py."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from flowkit import registry
from flowkit.curation.criteria.base import Decision
from flowkit.curation.run import Curation, curate
from flowkit.errors import DataError

CHEAP = ("clipping", "silence", "speaking_rate")


def _source(tmp_path: Path, demo_clips: Path, n: int = 40) -> Path:
    """The first ``n`` demo clips as a metadata.csv folder, one transcript made wrong (too long)."""
    src = tmp_path / "src"
    src.mkdir()
    lines = (demo_clips / "metadata.csv").read_text(encoding="utf-8").splitlines()[:n]
    parts = lines[2].split("|")
    parts[1] = " ".join(line.split("|")[1] for line in lines[:12])
    lines[2] = "|".join(parts)
    (src / "metadata.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (src / "wavs").symlink_to(demo_clips / "wavs")
    return src


def _settings() -> Curation:
    registry.load_plugins()
    return Curation(criteria=[registry.build("criterion", n) for n in CHEAP], workers=1, examples=2)


def test_curate_writes_the_lists_and_the_page(tmp_path, demo_clips) -> None:
    src = _source(tmp_path, demo_clips)
    outcome = curate([src], tmp_path / "cur", settings=_settings(), progress=False)
    rows = [json.loads(x) for x in (tmp_path / "cur" / "decisions.jsonl").read_text().splitlines()]
    assert len(rows) == outcome.clips == 40
    dropped = [r for r in rows if not r["keep"]]
    assert rows[2]["keep"] is False and rows[2]["reasons"][0].startswith("speaking_rate:")
    keep = (tmp_path / "cur" / "keep.lst").read_text().split()
    assert keep == [r["segment_id"] for r in rows if r["keep"]] and len(keep) == 40 - len(dropped)
    csv_lines = (tmp_path / "cur" / "decisions.csv").read_text().splitlines()
    assert csv_lines[0] == "segment_id,keep,speaker,language,reasons" and len(csv_lines) == 41
    page = (tmp_path / "cur" / "curation.html").read_text()
    assert "speaking_rate" in page and "data:image/png;base64" in page and "data:audio/wav;base64" in page
    summary = json.loads((tmp_path / "cur" / "curation.json").read_text())
    assert set(summary["thresholds"]) == set(CHEAP) and summary["kept"] == len(keep)
    assert (src / "metadata.csv").read_text().count("\n") == 40  # the source is only read


class Neighbours:
    """A criterion whose measure of a clip depends on the clips measured with it (as a packed
    recogniser's words do): the ids of its batch, hashed."""

    def measure_many(self, clips) -> list[dict]:
        batch = zlib.crc32("|".join(c.info.segment_id for c in clips).encode()) % 1000
        return [{"batch": batch, "position": i} for i in range(len(clips))]

    def measure(self, clip) -> dict:  # pragma: no cover - measure_many is used
        raise AssertionError("measured alone")

    def decide(self, clips, measures) -> Decision:
        values = [float(m["batch"] * 100 + m["position"]) for m in measures]
        return Decision("neighbours", "batch", values, [None] * len(values), [])

    def describe(self) -> dict:
        return {"name": "neighbours", "judge": None}


def _with_neighbours() -> Curation:
    return Curation(criteria=[*_settings().criteria, Neighbours()], workers=1, examples=2)


def test_a_killed_curation_run_again_gives_the_same_list(tmp_path, demo_clips, interrupt_after) -> None:
    from flowkit.curation import measure

    src = _source(tmp_path, demo_clips)
    whole = tmp_path / "whole"
    curate([src], whole, settings=_with_neighbours(), progress=False)
    cut = tmp_path / "cut"
    interrupt_after(measure, 1)  # after the first chunk's lines
    with pytest.raises(KeyboardInterrupt):
        curate([src], cut, settings=_with_neighbours(), progress=False)
    lines = (cut / "measures.jsonl").read_text().splitlines(keepends=True)
    assert len(lines) == measure.CHUNK
    assert not (cut / "keep.lst").exists()
    # a kill in the middle of the chunk's write: 5 of its lines, then half a line
    kept = 5
    (cut / "measures.jsonl").write_text("".join(lines[:kept]) + '{"segment_id": "allison_en_digits')
    outcome = curate([src], cut, settings=_with_neighbours(), progress=False)
    assert outcome.measured_now == 40  # the torn chunk again whole (beside the same neighbours), then the rest
    for name in ("keep.lst", "decisions.jsonl", "decisions.csv"):
        assert (cut / name).read_text() == (whole / name).read_text(), name


def test_chunks_hold_one_language_in_source_order() -> None:
    from flowkit.curation.measure import chunks
    from flowkit.data.manifest import Item

    items = [Item(segment_id=f"c{i}", audio=Path("x.wav"), text="t", speaker="s", language="en" if i % 3 else "es")
             for i in range(10)]
    got = [[i.segment_id for i in c] for c in chunks(items, 3)]
    assert got == [["c0", "c3", "c6"], ["c9"], ["c1", "c2", "c4"], ["c5", "c7", "c8"]]


def test_prepare_keeps_only_the_listed_clips(tmp_path, demo_clips) -> None:
    from flowkit.data.prepare import prepare_store
    from flowkit.data.store import StoreReader

    src = _source(tmp_path, demo_clips, n=10)
    ids = [line.split("|")[0] for line in (src / "metadata.csv").read_text().splitlines()]
    keep = tmp_path / "keep.lst"
    keep.write_text("# kept\n" + "\n".join(ids[:4]) + "\n\n")
    summary = prepare_store([src], tmp_path / "s.zarr", keep=keep, progress=False)
    reader = StoreReader.open(summary.store)
    try:
        assert sorted(reader.strings["segment_id"]) == sorted(ids[:4])
    finally:
        reader.close()
    assert summary.rejected["curated_out"] == 6
    rejected = [json.loads(x) for x in (summary.store / "rejections.jsonl").read_text().splitlines()]
    assert sorted(r["segment_id"] for r in rejected if r["reason"] == "curated_out") == sorted(ids[4:])
    empty = tmp_path / "empty.lst"
    empty.write_text("# nothing\n")
    with pytest.raises(DataError, match=r"--keep .*empty.lst lists no segment id"):
        prepare_store([src], tmp_path / "t.zarr", keep=empty, progress=False)
    with pytest.raises(DataError, match=r"--keep .*missing.lst: cannot read it"):
        prepare_store([src], tmp_path / "t.zarr", keep=tmp_path / "missing.lst", progress=False)


def test_the_curate_command(tmp_path, demo_clips) -> None:
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    src = _source(tmp_path, demo_clips, n=20)
    criteria = ", ".join(f"@criterion.{n}()" for n in CHEAP)
    result = CliRunner().invoke(app, ["curate", str(src), "--out", str(tmp_path / "cur"), "--quiet",
                                      "-b", f"Curation.criteria = [{criteria}]", "-b", "Curation.workers = 1"])
    assert result.exit_code == 0, result.output
    assert "curate: 20 clips" in result.output and "speaking_rate" in result.output
    wrong = (src / "metadata.csv").read_text().splitlines()[2].split("|")[0]
    assert wrong not in (tmp_path / "cur" / "keep.lst").read_text().split()
    assert "of the source not a clip" not in result.output
    with (src / "metadata.csv").open("a", encoding="utf-8") as f:
        f.write("no_text_line||allison|en\n")
    again = CliRunner().invoke(app, ["curate", str(src), "--out", str(tmp_path / "cur"), "--quiet",
                                     "-b", f"Curation.criteria = [{criteria}]", "-b", "Curation.workers = 1"])
    assert again.exit_code == 0, again.output
    assert "1 line of the source not a clip" in again.output and "rejected_lines" in again.output
    bad = CliRunner().invoke(app, ["curate", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")])
    assert bad.exit_code == 3, bad.output
    assert "not an input flowkit can read" in bad.output


def test_a_corrected_transcript_is_measured_again(tmp_path, demo_clips) -> None:
    src = _source(tmp_path, demo_clips, n=20)
    out = tmp_path / "cur"
    curate([src], out, settings=_settings(), progress=False)
    lines = (src / "metadata.csv").read_text(encoding="utf-8").splitlines()
    wrong = lines[2].split("|")[0]
    assert wrong not in (out / "keep.lst").read_text().split()
    # the user mends the transcript (the text the clip says) and runs the same command again
    right = (demo_clips / "metadata.csv").read_text(encoding="utf-8").splitlines()[2]
    (src / "metadata.csv").write_text("\n".join([*lines[:2], right, *lines[3:]]) + "\n", encoding="utf-8")
    outcome = curate([src], out, settings=_settings(), progress=False)
    assert outcome.measured_now == 16  # the mended clip's chunk, heard beside the same neighbours
    assert wrong in (out / "keep.lst").read_text().split()
    fresh = tmp_path / "fresh"
    curate([src], fresh, settings=_settings(), progress=False)
    assert (out / "keep.lst").read_text() == (fresh / "keep.lst").read_text()


class Packed:
    """A criterion that keeps a value per clip and calls values over ``floor`` stale, as
    transcript_cer calls a packed hearing over a lowered floor."""

    def __init__(self, floor: float) -> None:
        self.floor, self.taken = floor, 0

    def measure_many(self, clips) -> list[dict]:
        self.taken += len(clips)
        return [{"value": 0.5 if i == 1 else 0.1, "heard": "packed" if self.floor > 0.4 else "alone"}
                for i in range(len(clips))]

    def measure(self, clip) -> dict:  # pragma: no cover - measure_many is used
        raise AssertionError("measured alone")

    def stale(self, measure) -> bool:
        return measure["heard"] == "packed" and measure["value"] > self.floor

    def decide(self, clips, measures) -> Decision:
        return Decision("packed", "value", [m["value"] for m in measures], [None] * len(measures), [])

    def describe(self) -> dict:
        return {"name": "packed", "judge": None}


def test_a_measure_that_the_present_settings_call_stale_is_taken_again(tmp_path, demo_clips) -> None:
    src = _source(tmp_path, demo_clips, n=20)
    out = tmp_path / "cur"
    first = Packed(floor=0.6)
    curate([src], out, settings=Curation(criteria=[first], workers=1, examples=0), progress=False)
    assert first.taken == 20
    same = Packed(floor=0.6)  # the same floor: every measure stands
    assert curate([src], out, settings=Curation(criteria=[same], workers=1, examples=0),
                  progress=False).measured_now == 0 and same.taken == 0
    lowered = Packed(floor=0.3)  # two chunks each hold a clip at 0.5 > 0.3: both measured again
    curate([src], out, settings=Curation(criteria=[lowered], workers=1, examples=0), progress=False)
    assert lowered.taken == 20
    records = [json.loads(x) for x in (out / "measures.jsonl").read_text().splitlines()]
    assert {r["measures"]["Packed"]["heard"] for r in records[-20:]} == {"alone"}


def test_measures_of_another_judge_are_refused_naming_what_differs(tmp_path, demo_clips) -> None:
    from flowkit.errors import ResumeError

    src = _source(tmp_path, demo_clips, n=4)
    one, other = Neighbours(), Neighbours()
    one.describe = lambda: {"name": "neighbours", "judge": {"model": "tiny.en", "pack_gap_s": 1.0}}
    other.describe = lambda: {"name": "neighbours", "judge": {"model": "tiny.en", "pack_gap_s": None}}
    curate([src], tmp_path / "cur", settings=Curation(criteria=[one], workers=1, examples=0), progress=False)
    with pytest.raises(ResumeError, match=r"another judge \(pack_gap_s 1.0 -> None\); give another --out"):
        curate([src], tmp_path / "cur", settings=Curation(criteria=[other], workers=1, examples=0), progress=False)
