"""`make demo`'s pipeline (tools/demo.sh) end to end at a smoke test's size: the bundled
sentences prepared, an aligner trained on them and the bundled store, its timings written,
gin/demo.gin trained on them and reported with the probe's WER. The full-size figures (time
on 2 cores, the samples' Whisper WER) are in docs/experiments.md; this checks that every
stage runs from a clone and that a rerun finds each stage's work done.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from flowkit.data.store import StoreReader

REPO = Path(__file__).resolve().parents[2]


def _demo(out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "ALIGN_STEPS": "150", "FLOWKIT": str(REPO / ".venv" / "bin" / "flowkit")}
    if not Path(env["FLOWKIT"]).is_file():
        env["FLOWKIT"] = "flowkit"
    return subprocess.run(["bash", "tools/demo.sh", str(out), "-b", "Trainer.steps = 6", "-b", "Probe.every = 6",
                           "-b", "Probe.sentences = 2", "-b", "Trainer.save_every = 3"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_demo_pipeline_runs_every_stage_and_reruns_as_done(tmp_path):
    out = tmp_path / "demo"
    first = _demo(out)
    assert first.returncode == 0, first.stderr[-3000:]
    store = out / "sentences.zarr"
    reader = StoreReader.open(store)
    assert reader.timings == "learned", "the aligner's timings are the store's active version"
    reader.close()
    records = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines()]
    probes = [r for r in records if r["kind"] == "probe"]
    assert [r["step"] for r in probes] == [6], "gin/demo.gin probes once, at the end"
    report = (out / "run" / "report.md").read_text()
    assert f"latest {probes[0]['probe_wer']:.3f} (step 6)" in report
    assert (out / "run" / "report.html").is_file()

    metrics = (out / "run" / "metrics.jsonl").read_text()
    aligner_metrics = (out / "aligner" / "metrics.jsonl").read_text()
    again = _demo(out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (out / "run" / "metrics.jsonl").read_text() == metrics, "a rerun of a finished demo trains nothing"
    assert (out / "aligner" / "metrics.jsonl").read_text() == aligner_metrics
