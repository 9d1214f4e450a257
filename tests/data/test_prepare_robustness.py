"""prepare never dies on one bad line, never leaks processes.

- a line that is not UTF-8 in metadata.csv, a .jsonl or a .csv manifest is one
  ``bad_encoding`` rejection with its line number; the rest lands;
- audio is found whatever the case of its extension;
- ``--append`` to a path that is not a store exits non-zero and creates nothing;
- kill -9 of the parent leaves no worker (nor resource tracker) alive, SIGTERM stops the
  workers and exits 130 with nothing published - with real kills of a real prepare;
- the summary shows the split per speaker and warns about a speaker all in one split.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synth_audio import make_corpus

from flowkit.data.dataset import LatentDataset
from flowkit.data.store import REJECTIONS_FILE
from flowkit.errors import DataError

BAD = b"caf\xe9 au lait"  # latin-1, not UTF-8


def _rejections(store: Path) -> list[dict]:
    return [json.loads(line) for line in (store / REJECTIONS_FILE).read_text(encoding="utf-8").splitlines()]


def test_a_non_utf8_line_in_metadata_csv_is_one_rejection(tmp_path, quiet_prepare):
    corpus = tmp_path / "c"
    lines = make_corpus(corpus, n=6)
    raw = [ln.encode() for ln in lines]
    raw[2] = raw[2].split(b"|")[0] + b"|" + BAD + b"|ann|en"
    (corpus / "metadata.csv").write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(raw) + b"\r\n")  # BOM, CRLF
    summary = quiet_prepare([corpus], tmp_path / "s.zarr")
    assert summary.accepted == 5 and summary.rejected == {"bad_encoding": 1}
    (rej,) = _rejections(tmp_path / "s.zarr")
    assert rej["reason"] == "bad_encoding" and rej["source"].endswith("metadata.csv:3")
    assert rej["segment_id"] == "ann_002" and "byte 0xe9" in rej["detail"]


def test_a_non_utf8_line_in_jsonl_and_csv_manifests_is_one_rejection(tmp_path, quiet_prepare):
    corpus = tmp_path / "c"
    make_corpus(corpus, n=4)
    wavs = sorted((corpus / "wavs").iterdir())
    jsonl = tmp_path / "m.jsonl"
    good = [json.dumps({"audio": str(w), "text": f"line {i}", "speaker": "ann"}).encode() for i, w in enumerate(wavs)]
    jsonl.write_bytes(b"\n".join([good[0], b'{"audio": "x.wav", "text": "' + BAD + b'"}', *good[1:]]) + b"\n")
    csv = tmp_path / "m.csv"
    rows = [f"{w},csv line {i},bob".encode() for i, w in enumerate(wavs)]
    csv.write_bytes(b"\n".join([b"audio,text,speaker", rows[0], rows[1], b"x.wav," + BAD + b",bob", *rows[2:]]) + b"\n")
    for manifest, line in ((jsonl, 2), (csv, 4)):
        out = tmp_path / f"{manifest.suffix[1:]}.zarr"
        summary = quiet_prepare([manifest], out)
        assert summary.accepted == 4 and summary.rejected == {"bad_encoding": 1}, manifest
        (rej,) = _rejections(out)
        assert rej["source"] == f"{manifest}:{line}"


def test_audio_is_found_whatever_the_case_of_its_extension(tmp_path, quiet_prepare):
    corpus = tmp_path / "c"
    make_corpus(corpus, n=4)
    wavs = corpus / "wavs"
    (wavs / "ann_000.wav").rename(wavs / "ann_000.WAV")
    (wavs / "bob_001.wav").rename(wavs / "bob_001.Wav")
    summary = quiet_prepare([corpus], tmp_path / "a.zarr")
    assert summary.accepted == 4 and not summary.rejected
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"audio": "c/wavs/ann_000.wav", "text": "hi there"}) + "\n")
    summary = quiet_prepare([manifest], tmp_path / "b.zarr")
    assert summary.accepted == 1 and not summary.rejected


def _cli(*args, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "flowkit", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300, **kwargs)


def test_append_to_a_path_that_is_not_a_store_creates_nothing(tmp_path, small_corpus):
    missing = tmp_path / "typo.zarr"
    result = _cli("prepare", small_corpus, "--out", missing, "--append", "--quiet", "--workers", "1")
    assert result.returncode == DataError.exit_code, result.stderr
    assert "no such store" in result.stderr and "without --append" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(tmp_path.iterdir()) == [small_corpus]  # no typo.zarr, no typo.zarr.partial
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    result = _cli("prepare", small_corpus, "--out", plain, "--append", "--quiet", "--workers", "1")
    assert result.returncode == DataError.exit_code and "not a zarr v3 store" in result.stderr
    assert sorted(p.name for p in plain.iterdir()) == ["notes.txt"]


def test_summary_shows_the_split_per_speaker_and_warns_about_one_split_speakers(tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, n=9, speakers=("ann", "bob", "cy"))
    meta = corpus / "metadata.csv"
    lines = meta.read_text().splitlines()
    meta.write_text("\n".join(ln for ln in lines if not ln.startswith("cy_") or ln.startswith("cy_002")) + "\n")
    result = _cli("prepare", corpus, "--out", tmp_path / "s.zarr", "--quiet", "--workers", "1")
    assert result.returncode == 0, result.stderr
    ds = [LatentDataset.open([tmp_path / "s.zarr"], split) for split in ("train", "val")]
    for speaker in ("ann", "bob", "cy"):
        train = sum(s.speaker == speaker for s in ds[0].segments)
        val = sum(s.speaker == speaker for s in ds[1].segments)
        assert f"split: {speaker}" in result.stdout and f"train {train}, val {val}" in result.stdout
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "speaker 'cy' has all its 1 segments in train" in warnings[0], result.stderr


def test_no_one_split_warning_when_the_input_chose_every_split(tmp_path):
    corpus = tmp_path / "c"
    make_corpus(corpus, n=4, speakers=("ann",))
    meta = corpus / "metadata.csv"
    meta.write_text("".join(f"{ln}|train\n" for ln in meta.read_text().splitlines()))
    result = _cli("prepare", corpus, "--out", tmp_path / "s.zarr", "--layout", "id,text,speaker,language,split",
                  "--quiet", "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert "split: ann" in result.stdout and "train 4, val 0" in result.stdout
    assert "warning:" not in result.stderr, result.stderr


# ---- real kills ------------------------------------------------------------------------


def _session(sid: int) -> list[int]:
    """Pids of live (not zombie) processes in session ``sid`` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(entry.name))
    return pids


def _start_prepare(corpus: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "flowkit", "prepare", str(corpus), "--out", str(out),
                             "--workers", "2", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    # running for real: both workers are up and results are being written
    while time.monotonic() < deadline and proc.poll() is None:
        if len(_session(proc.pid)) >= 4 and (out.with_name(out.name + ".partial") / "latents").exists():
            return proc
        time.sleep(0.05)
    proc.kill()
    _wait_gone(proc.pid, 0)
    pytest.fail(f"prepare did not get going (exit {proc.poll()}): {proc.communicate()[1][-2000:]}")


def _wait_gone(sid: int, seconds: float = 20.0) -> list[int]:
    """Waits for session ``sid`` to empty; returns the pids still alive then, after killing them
    (so a failure does not leak processes into the rest of the suite)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = _session(sid)
        if not left:
            return []
        time.sleep(0.1)
    left = _session(sid)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


@pytest.fixture
def long_corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "long"
    make_corpus(corpus, n=240, seconds=2.0)
    return corpus


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_prepare_leaves_no_worker_alive(tmp_path, long_corpus):
    proc = _start_prepare(long_corpus, tmp_path / "s.zarr")
    children = [p for p in _session(proc.pid) if p != proc.pid]
    assert len(children) >= 3  # two workers and multiprocessing's resource tracker
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = _wait_gone(proc.pid)
    assert left == [], f"processes outlived a kill -9 of prepare: {left}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_stops_prepare_and_its_workers_cleanly(tmp_path, long_corpus):
    out = tmp_path / "s.zarr"
    proc = _start_prepare(long_corpus, out)
    proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        left = _wait_gone(proc.pid)
    assert left == []
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and [ln for ln in stderr.splitlines() if ln.strip()] == ["error: interrupted"]
    assert not out.exists() and not out.with_name(out.name + ".partial").exists()



# a signal at the worst moments of a worker's start. SIGTERM to the parent just after a worker
# is forked, before the parent has written the worker's start-up data to its pipe (or listed
# it as its child): unheld, it left that worker unkilled, printing spawn's "EOFError: Ran out
# of input" traceback. SIGINT (a Ctrl-C to the process group) at a worker still in spawn's
# bootstrap, before its initializer ignores SIGINT: it raised KeyboardInterrupt there.
_SIGNAL_AT_START = """
import os, signal, sys
import multiprocessing.util as mp_util
from flowkit.data.workers import pool_map, sigterm_as_interrupt

class SignalWhenUnpickled:  # in the worker, unpickling it raises SIGINT there
    def __reduce__(self):
        return signal.raise_signal, (signal.SIGINT,)

fork = mp_util.spawnv_passfds
def fork_then_sigterm(path, args, fds):
    pid = fork(path, args, fds)
    if "--multiprocessing-fork" in args:  # a worker (not the resource tracker)
        os.kill(os.getpid(), signal.SIGTERM)
    return pid

initargs = ()
if sys.argv[1] == "parent-at-fork":
    mp_util.spawnv_passfds = fork_then_sigterm
else:
    initargs = (SignalWhenUnpickled(),)
try:
    with sigterm_as_interrupt():
        print(sum(pool_map(abs, range(-16, 0), 2, initializer=print, initargs=initargs)))
except KeyboardInterrupt:
    sys.exit("interrupted")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(("where", "stdout", "stderr"), [("parent-at-fork", "", "interrupted"),
                                                         ("worker-in-bootstrap", "136", "")])
def test_a_signal_while_workers_start_neither_prints_a_traceback_nor_leaks_one(where, stdout, stderr):
    proc = subprocess.Popen([sys.executable, "-c", _SIGNAL_AT_START, where], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        left = _wait_gone(proc.pid)
    assert left == [], f"processes outlived the pool: {left}"
    assert err.strip() == stderr and out.split()[-1:] == ([stdout] if stdout else []), err
