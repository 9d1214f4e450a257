"""The learned aligner end to end on real speech: train, resume to the same bits, write timings
into the store beside the old ones, train the aligned TTS path on them, refuse what cannot align."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from align_data import TINY, make_store

from flowkit.align.training import train_aligner
from flowkit.data.store import StoreReader

REPO = Path(__file__).resolve().parents[2]


def _state(run: Path) -> dict:
    from flowkit.checkpoints.files import find_latest, load_checkpoint

    return load_checkpoint(find_latest(run / "checkpoints")[0]).state["model"]


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _train_records(run: Path) -> list[str]:
    return [line for line in (run / "metrics.jsonl").read_text().splitlines() if '"step_s"' in line]


def test_resume_continues_the_same_bits(store20, tmp_path):
    straight = train_aligner(["gin/align.gin"], TINY, data=[store20], out=tmp_path / "a", steps=6, progress=False)
    train_aligner(["gin/align.gin"], TINY, data=[store20], out=tmp_path / "b", steps=3, progress=False)
    resumed = train_aligner(["gin/align.gin"], TINY, data=[store20], out=tmp_path / "b", steps=6, progress=False)
    assert straight.name == resumed.name == "step-00000006"
    assert _equal(_state(tmp_path / "a"), _state(tmp_path / "b"))
    strip = [json.loads(r) for r in _train_records(tmp_path / "a")]
    again = [json.loads(r) for r in _train_records(tmp_path / "b")]
    assert [{k: v for k, v in r.items() if k != "step_s"} for r in strip] == \
        [{k: v for k, v in r.items() if k != "step_s"} for r in again]


def test_killed_run_resumes_to_the_same_bits(store20, tmp_path):
    """SIGKILL after the first checkpoint; the same command finishes the run as an uninterrupted one."""
    steps = ["--steps", "30"]
    args = [sys.executable, "-m", "flowkit", "align", "train", "gin/align.gin", "--data", str(store20), "--quiet",
            *[x for b in TINY for x in ("-b", b)], *steps]
    subprocess.run([*args, "--out", str(tmp_path / "straight")], cwd=REPO, check=True, capture_output=True)
    proc = subprocess.Popen([*args, "--out", str(tmp_path / "killed")], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "killed" / "checkpoints").glob("step-00000006")) and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    killed_early = proc.poll() is None
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    subprocess.run([*args, "--out", str(tmp_path / "killed")], cwd=REPO, check=True, capture_output=True)
    assert _equal(_state(tmp_path / "straight"), _state(tmp_path / "killed"))
    assert [r for r in _train_records(tmp_path / "straight")] != [] and killed_early in (True, False)
    strip = lambda lines: [{k: v for k, v in json.loads(r).items() if k != "step_s"} for r in lines]  # noqa: E731
    assert strip(_train_records(tmp_path / "straight")) == strip(_train_records(tmp_path / "killed"))


def test_another_config_is_refused_on_resume(store20, tmp_path):
    from flowkit.errors import ResumeError

    train_aligner(["gin/align.gin"], TINY, data=[store20], out=tmp_path / "r", steps=2, progress=False)
    with pytest.raises(ResumeError, match="another config"):
        train_aligner(["gin/align.gin"], [*TINY, "AlignRun.lr = 1e-4"], data=[store20], out=tmp_path / "r", steps=4,
                      progress=False)


@pytest.fixture(scope="module")
def aligned(tmp_path_factory):
    """A copy of the 20-clip store with learned timings written, and the aligner run."""
    root = tmp_path_factory.mktemp("aligned")
    store = make_store(root, long_text_clip=True)
    import zarr

    group = zarr.open_group(str(store), mode="r")
    before = {a: np.asarray(group[a][:]) for a in ("units", "unit_offsets", "has_units", "units_estimated")}
    train_aligner(["gin/align.gin"], TINY, data=[store], out=root / "run", steps=12, progress=False)
    from flowkit.align.apply import Settings, align_store

    # 12 steps leave the tiny aligner crowding characters onto single frames, which align write
    # refuses as squeezed (tests/align/test_refusals.py); this fixture is about the writing
    outcome = align_store(store, root / "run", settings=Settings(max_single_frame_share=1.0), progress=False)
    return store, root / "run", outcome, before


def test_write_serves_learned_timings_and_keeps_the_old(aligned):
    import zarr

    store, _, outcome, before = aligned
    group = zarr.open_group(str(store), mode="r")
    for name, values in before.items():  # prepare's timings stay as they were
        assert np.array_equal(np.asarray(group[name][:]), values)
    reader = StoreReader.open(store)
    try:
        assert reader.timings == "learned"
        assert reader.attrs["fingerprint"] != reader.attrs["prepare_fingerprint"]
        ids = list(reader.strings["segment_id"])
        for row, sid in enumerate(ids):
            units = reader.segment_units(row)
            result = outcome.results[sid]
            assert units == result.units
            if units is None:
                continue
            assert reader.numeric["units_estimated"][row]
            frames = [fs for _, _, fs, fe in units] + [units[-1][3]]
            assert all(fe > fs for _, _, fs, fe in units)  # every word >= 1 frame
            assert frames == sorted(frames) and units[-1][3] <= reader.lengths[row]  # monotonic, inside the clip
            assert [(cs, ce) for cs, ce, _, _ in units] == [(cs, ce) for cs, ce, _, _ in
                                                          outcome.corpus.tokens[ids.index(sid)].words]
    finally:
        reader.close()


def test_training_continues_on_a_store_it_has_written_timings_into(aligned, tmp_path):
    store, run, _, _ = aligned
    reader = StoreReader.open(store)
    assert reader.timings == "learned"  # the store's fingerprint now follows the aligner's timings
    reader.close()
    shutil.copytree(run, tmp_path / "run")
    last = train_aligner(["gin/align.gin"], TINY, data=[store], out=tmp_path / "run", steps=15, progress=False)
    assert last.name == "step-00000015"


def test_text_longer_than_the_audio_is_one_rejection(aligned):
    store, _, outcome, _ = aligned
    assert outcome.results["long_text"].units is None
    assert outcome.refused.get("align_text_too_long") == 1
    lines = [json.loads(line) for line in (store / "rejections.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in lines if r["segment_id"] == "long_text"] == ["align_text_too_long"]


def test_refusal_thresholds_refuse_instead_of_stretching(aligned):
    """With thresholds no alignment meets, every segment is refused with that reason (nothing
    stretched); and a write where every segment is refused writes nothing and says so."""
    from flowkit.align.apply import Settings, align_corpus, load_aligner

    _, run, outcome, _ = aligned
    model, vocab, _, _ = load_aligner(run)
    stretched = align_corpus(model, outcome.corpus, vocab, 100.0, Settings(max_token_s=0.001), progress=False)
    assert {r.reason for sid, r in stretched.items() if sid != "long_text"} == {"align_stretched"}
    doubtful = align_corpus(model, outcome.corpus, vocab, 100.0,
                            Settings(confidence_mads=-1e6, max_token_s=1e9, max_pause_s=1e9,
                                     max_single_frame_share=1.0),
                            progress=False)
    assert {r.reason for sid, r in doubtful.items() if sid != "long_text"} == {"align_low_confidence"}
    import shutil

    from flowkit.align.apply import align_store
    from flowkit.errors import DataError

    copy = run.parent / "all-refused.zarr"
    shutil.copytree(aligned[0], copy)
    versions = sorted(p.name for p in (copy / "timings").iterdir())
    with pytest.raises(DataError, match=r"aligned none of its 21 segments \(refused: align_stretched 20, "
                                        r"align_text_too_long 1\); nothing was written"):
        align_store(copy, run, name="none", settings=Settings(max_token_s=0.001), progress=False)
    assert sorted(p.name for p in (copy / "timings").iterdir()) == versions


def test_use_switches_between_versions(aligned, tmp_path):
    import shutil

    from flowkit.data.store.timings import use_version
    from flowkit.errors import DataError

    store = tmp_path / "copy.zarr"
    shutil.copytree(aligned[0], store)
    assert use_version(store, "prepare") == "learned"
    reader = StoreReader.open(store)
    assert reader.timings == "prepare" and "prepare_fingerprint" not in reader.attrs
    reader.close()
    with pytest.raises(DataError, match="has no timings 'nope'; it has: prepare, learned"):
        use_version(store, "nope")


def test_aligned_tts_path_trains_on_learned_timings(aligned, tmp_path):
    """flowkit train on the aligned path reads the learned timings (its data fingerprint is the version's)."""
    store = aligned[0]
    env = {**os.environ, "FLOWKIT_NO_PLUGINS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "flowkit", "train", "gin/e11_aligned.gin", "gin/debug.gin", "--data", str(store),
         "--out", str(tmp_path / "tts"), "--steps", "2", "--device", "cpu"],
        cwd=REPO, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (tmp_path / "tts" / "checkpoints" / "step-00000002").is_dir()


def test_cli_write_prints_the_boundary_error_against_reference_grids(aligned, tmp_path):
    """`flowkit align score --reference`: TextGrids made from prepare's energy timings score
    prepare's (estimated) version at exactly 0 frames."""
    store = aligned[0]
    reader = StoreReader.open(store)
    grids = tmp_path / "grids"
    grids.mkdir()
    import zarr

    group = zarr.open_group(str(store), mode="r")
    offsets, units = np.asarray(group["unit_offsets"][:]), np.asarray(group["units"][:])
    for row, sid in enumerate(reader.strings["segment_id"]):
        text = reader.strings["text"][row]
        block = units[offsets[row]:offsets[row + 1]]
        if not len(block):
            continue
        items = "".join(
            f'        intervals [{k + 1}]:\n            xmin = {fs / 100:.4f}\n            xmax = {fe / 100:.4f}\n'
            f'            text = "{text[cs:ce]}"\n' for k, (cs, ce, fs, fe) in enumerate(block.tolist()))
        (grids / f"{sid}.TextGrid").write_text(
            'File type = "ooTextFile"\nObject class = "TextGrid"\n\nxmin = 0\nxmax = 9\ntiers? <exists>\nsize = 1\n'
            f'item []:\n    item [1]:\n        class = "IntervalTier"\n        name = "words"\n        xmin = 0\n'
            f'        xmax = 9\n        intervals: size = {len(block)}\n{items}')
    reader.close()
    result = subprocess.run([sys.executable, "-m", "flowkit", "align", "score", str(store), "--reference", str(grids)],
                            cwd=REPO, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if "prepare (estimated): words" in line)
    assert row.split("│")[4].strip() == "0.00"
    assert "learned: words" in result.stdout


def test_train_refuses_an_aligner_experiment(tmp_path):
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    result = CliRunner().invoke(app, ["train", "gin/align.gin", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert ("gin/align.gin is an aligner experiment (it binds AlignRun): run it with `flowkit align train"
            in result.output)
    assert not (tmp_path / "r").exists()


def test_segments_appended_after_write_are_named_with_the_fix(aligned, tmp_path):
    """A version covers the segments it was written for: after an append the store refuses to
    serve it and says how to realign or fall back to prepare's timings."""
    import shutil

    from flowkit.data.prepare import prepare_store
    from flowkit.errors import DataError

    store = tmp_path / "grown.zarr"
    shutil.copytree(aligned[0], store)
    extra = tmp_path / "extra"
    (extra / "wavs").mkdir(parents=True)
    from flowkit.data.demo import demo_clips_path

    row = next(line for line in (demo_clips_path() / "metadata.csv").read_text().splitlines() if "|allison|en" in line)
    name = row.split("|")[0]
    shutil.copy(demo_clips_path() / "wavs" / f"{name}.flac", extra / "wavs" / "appended.flac")
    (extra / "metadata.csv").write_text(f"appended|{row.split('|')[1]}|allison|en\n")
    prepare_store([extra], store, append=True, progress=False, workers=1)
    with pytest.raises(DataError, match=r"timings 'learned' cover 21 segments of 22 .*flowkit align write"):
        StoreReader.open(store)


def test_a_run_killed_before_its_first_checkpoint_starts_again_and_a_tts_run_is_refused(store20, tmp_path):
    import shutil

    from flowkit.errors import ResumeError

    train_aligner(["gin/align.gin"], TINY, data=[store20], out=tmp_path / "a", steps=2, progress=False)
    shutil.rmtree(tmp_path / "a" / "checkpoints")  # as if killed before its first save
    again = train_aligner(["gin/align.gin"], TINY, data=[store20], out=tmp_path / "a", steps=2, progress=False)
    assert again.name == "step-00000002"
    assert [json.loads(r)["step"] for r in _train_records(tmp_path / "a")] == [2]
    tts = tmp_path / "tts"
    tts.mkdir()
    (tts / "run_info.json").write_text('{"config_files": ["gin/quickstart.gin"]}')
    with pytest.raises(ResumeError, match="not an aligner run"):
        train_aligner(["gin/align.gin"], TINY, data=[store20], out=tts, steps=2, progress=False)


def test_align_commands_refuse_what_is_not_theirs(tmp_path):
    """`align use` on a path that is no store, `align train` on a TTS experiment: one line each."""
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    runner = CliRunner()
    (tmp_path / "afile").write_text("x")
    result = runner.invoke(app, ["align", "use", str(tmp_path / "afile"), "prepare"])
    assert result.exit_code == 3 and "not a zarr v3 store" in result.output, result.output
    result = runner.invoke(app, ["align", "use", str(tmp_path / "nope.zarr"), "prepare"])
    assert result.exit_code == 3 and "no such store" in result.output, result.output
    from flowkit.data.demo import demo_store_path

    result = runner.invoke(app, ["align", "train", "gin/debug.gin", "--data", str(demo_store_path()),
                                 "--out", str(tmp_path / "al")])
    assert result.exit_code == 2, result.output
    assert "gin/debug.gin binds no AlignRun: it is not an aligner experiment" in result.output
    assert not (tmp_path / "al").exists()
