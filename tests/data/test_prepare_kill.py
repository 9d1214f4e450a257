"""A prepare killed with SIGKILL leaves nothing a reader accepts; a rerun completes. Also append."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synth_audio import make_corpus

from flowkit.data.dataset import LatentDataset
from flowkit.data.prepare import PrepareSettings
from flowkit.data.store import StoreReader
from flowkit.errors import DataError

_SCRIPT = """
import sys
from pathlib import Path
from flowkit.data.prepare import PrepareSettings, prepare_store
prepare_store([Path(sys.argv[1])], Path(sys.argv[2]), settings=PrepareSettings(chunk_frames=16),
              append=sys.argv[3] == "1", progress=False)
"""


def _kill_mid_write(corpus: Path, out: Path, append: bool, watch: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(corpus), str(out), "1" if append else "0"])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if watch.exists() and any(watch.iterdir()):  # latent chunks are being written
                break
            time.sleep(0.005)
        assert proc.poll() is None, "prepare finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()


def test_killed_prepare_is_never_complete_and_rerun_completes(tmp_path, quiet_prepare):
    corpus = tmp_path / "in"
    make_corpus(corpus, n=40, seconds=1.0)
    out = tmp_path / "s.zarr"
    _kill_mid_write(corpus, out, False, tmp_path / "s.zarr.partial" / "latents" / "c")
    assert (tmp_path / "s.zarr.partial").exists()
    with pytest.raises(DataError, match="no such store"):
        StoreReader.open(out)
    with pytest.raises(DataError, match="interrupted prepare"):
        StoreReader.open(tmp_path / "s.zarr.partial")
    summary = quiet_prepare([corpus], out, settings=PrepareSettings(chunk_frames=16))
    assert summary.accepted == 40 and not (tmp_path / "s.zarr.partial").exists()
    assert len(LatentDataset.open([out], None)) == 40


def test_append_and_killed_append(tmp_path, quiet_prepare):
    first, second = tmp_path / "one", tmp_path / "two"
    make_corpus(first, n=4, speakers=("ann",))
    make_corpus(second, n=30, speakers=("cat",))
    for p in (second / "wavs").iterdir():  # distinct ids from the first batch
        p.rename(p.with_name("x" + p.name))
    (second / "metadata.csv").write_text("".join("x" + ln + "\n"
                                                 for ln in (second / "metadata.csv").read_text().splitlines()))
    out = tmp_path / "s.zarr"
    quiet_prepare([first], out, settings=PrepareSettings(chunk_frames=16))
    before = StoreReader.open(out).attrs["fingerprint"]
    _kill_mid_write(second, out, True, out / "latents" / "c" / "40")
    reader = StoreReader.open(out)
    assert reader.n_segments == 4 and reader.attrs["fingerprint"] == before
    summary = quiet_prepare([second, first], out, append=True, settings=PrepareSettings(chunk_frames=16))
    assert summary.accepted == 30 and summary.rejected["duplicate_id"] == 4
    ds = LatentDataset.open([out], None)
    assert len(ds) == 34 and ds.report.rejections == []
    assert {s.speaker for s in ds.segments if s.split == "val"} == {"ann", "cat"}
