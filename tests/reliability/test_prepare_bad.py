"""`flowkit prepare` and the commands after it, on what users' inputs and habits do.

Each case runs the command as a user does (a subprocess of ``python -m flowkit``) and
checks the exit code, that the failure is one ``error:`` line naming what to do, and what
is left on disk: no empty store published, no orphan ``.partial`` or lock file.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from reliability_helpers import DEBUG_GIN, assert_one_clear_line, cli, env, flowkit_argv, segment

#: short clips of the bundled demo recordings
CLIP_IDS = ("allison_en_call-forwarding", "allison_en_conf-muted", "allison_en_agent-loggedoff",
            "allison_en_conf-hasjoin")


def _clip(k: int) -> Path:
    from flowkit.data.demo import demo_clips_path

    return demo_clips_path() / "wavs" / f"{CLIP_IDS[k]}.flac"


def _manifest(path: Path, rows) -> Path:
    """A JSONL manifest of ``(id, clip index, language)`` rows."""
    path.write_text("".join(json.dumps({"audio": str(_clip(k)), "id": sid, "text": "a few words",
                                        "speaker": "allison", "language": lang}) + "\n" for sid, k, lang in rows),
                    encoding="utf-8")
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".partial", ".lock")))


# ---- every row rejected ------------------------------------------------------------


@pytest.mark.parametrize("where", ["listing", "decoding"])
def test_prepare_that_rejects_every_row_exits_3_and_publishes_no_store(tmp_path, where):
    # before: exit 0, an empty store at --out and the summary "accepted 0"
    if where == "listing":  # rejected before any audio is decoded
        manifest = _manifest(tmp_path / "list.jsonl", [("a", 0, "klingon"), ("b", 1, "elvish")])
        extra: tuple[str, ...] = ()
    else:  # rejected by what the audio is
        manifest = _manifest(tmp_path / "list.jsonl", [("a", 0, "en"), ("b", 1, "en")])
        extra = ("-b", "prepare.max_seconds = 0.5")
    out = tmp_path / "s.zarr"
    result = cli("prepare", manifest, "--out", out, "--workers", "1", "--quiet", *extra)
    assert result.returncode == 3, result.stdout + result.stderr
    line = assert_one_clear_line(result, "all 2", "s.zarr.rejections.jsonl")
    assert ("unknown_language 2" if where == "listing" else "too_long 2") in line, line
    assert not out.exists() and _leftovers(tmp_path) == []
    reasons = [json.loads(r)["reason"] for r in (tmp_path / "s.zarr.rejections.jsonl").read_text().splitlines()]
    assert len(reasons) == 2


# ---- --loudness says what it did -------------------------------------------------------


def test_loudness_message_says_the_target_and_what_was_reached():
    # before: "normalised to 10 LUFS (gain ..., held at the -1 dBFS peak ceiling; -4.3 LUFS, ...)"
    from flowkit.synth.level import fit_level

    sr = 24000
    t = np.arange(2 * sr) / sr
    audio = 0.05 * np.sin(2 * np.pi * 220 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    _, level = fit_level(audio, sr, 10.0)  # 10 LUFS cannot be reached under the peak ceiling
    text = level.describe()
    assert level.limited and level.loudness_lufs < 0
    assert not text.startswith("normalised to 10 LUFS"), text
    assert "10 LUFS asked" in text and f"{level.loudness_lufs:.1f} LUFS" in text and "peak ceiling" in text, text
    # a reachable target is applied as given (the value, not a default) and said so; 0.1 LU: pyloudnorm's
    # gating makes the gain-scaled clip measure within a few hundredths of the target
    _, level = fit_level(audio, sr, -30.0)
    assert not level.limited and abs(level.loudness_lufs + 30.0) < 0.1
    assert level.describe().startswith("normalised to -30 LUFS"), level.describe()


# ---- two writers of one shard ------------------------------------------------------------

_PACE = '''
import os, time
_pause = float(os.environ.get("FLOWKIT_TEST_ITEM_PAUSE", "0") or 0)
if _pause > 0:
    from flowkit.data import prepare

    _process = prepare.process_item

    def _paced(item):
        time.sleep(_pause)
        return _process(item)

    prepare.process_item = _paced
'''


def test_two_prepares_of_one_shard_the_second_names_the_first_and_nothing_is_orphaned(tmp_path):
    # before: the second said ".partial exists but was not written by flowkit prepare" (or
    # removed the first one's .partial under it) and an orphan .partial was left
    from flowkit.data.shards import shard_of

    rows = [(f"clip{k}", k % len(CLIP_IDS), "en") for k in range(8)]
    mine = [sid for sid, _, _ in rows if shard_of(sid, 2) == 0]
    assert mine, "no item of the listing falls in shard 0"
    manifest = _manifest(tmp_path / "list.jsonl", rows)
    pace = tmp_path / "pace"
    pace.mkdir()
    (pace / "sitecustomize.py").write_text(_PACE, encoding="utf-8")
    out = tmp_path / "shards"
    argv = flowkit_argv("prepare", manifest, "--out", out, "--shard", "0/2", "--workers", "1", "--quiet")
    path = os.pathsep.join(p for p in (str(pace), os.environ.get("PYTHONPATH", "")) if p)
    first = subprocess.Popen(argv, env=env(PYTHONPATH=path, FLOWKIT_TEST_ITEM_PAUSE="4"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out.is_dir() and any(p.name.endswith(".partial") for p in out.iterdir())):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.1)
        second = cli("prepare", manifest, "--out", out, "--shard", "0/2", "--workers", "1", "--quiet")
        assert second.returncode == 3, second.stdout + second.stderr
        assert_one_clear_line(second, "shard 0/2", f"pid {first.pid}")
        stdout, stderr = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, stdout + stderr
    assert _leftovers(out) == []
    from flowkit.data.store import StoreReader

    reader = StoreReader.open(out / "shard-00000-of-00002.zarr")
    assert sorted(reader.strings["segment_id"]) == sorted(mine)
    reader.close()


def test_a_lock_left_by_a_dead_prepare_is_taken_over(tmp_path):
    manifest = _manifest(tmp_path / "list.jsonl", [("a", 0, "en"), ("b", 1, "en")])
    gone = subprocess.Popen(["true"])  # a pid that has exited
    gone.wait()
    (tmp_path / "s.zarr.lock").write_text(json.dumps({"pid": gone.pid, "host": "x", "since": 0}))
    result = cli("prepare", manifest, "--out", tmp_path / "s.zarr", "--workers", "1", "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _leftovers(tmp_path) == []


# ---- training on an empty store ------------------------------------------------------


@pytest.mark.parametrize("kind", ["empty", "val_only"])
def test_training_on_a_store_without_training_segments_is_one_line(tmp_path, kind):
    # before: "no usable training segment in S ({'split': 'train', 'stores': [...], ...})"
    from flowkit.data.store import StoreWriter

    store = tmp_path / "s.zarr"
    writer = StoreWriter.create(store, encoder_name="synthetic", encoder_params={"dim": 8}, frame_rate=100.0,
                                sample_rate=16000, latent_dim=8, latent_dtype="float32")
    if kind == "val_only":
        rng = np.random.default_rng(0)
        for k in range(3):
            writer.add(segment(k, 0, rng, split="val"))
    writer.commit()
    result = cli("train", DEBUG_GIN, "--data", store, "--out", tmp_path / "run", "--steps", "1", "--device", "cpu")
    assert result.returncode == 3, result.stdout + result.stderr
    want = "has no segments" if kind == "empty" else "none of its 3 segments is in the train split"
    line = assert_one_clear_line(result, str(store), want)
    assert "{" not in line and "'split'" not in line, line
