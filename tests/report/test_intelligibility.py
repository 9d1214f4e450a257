"""The report's intelligibility section: probe WER with its ceilings, text gain in words,
and the probe sentences of the best and latest probe (run files in the trainer's format)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from report_helpers import write_synthetic_run

from flowkit.report.build import build_document, write_report
from flowkit.report.document import Figure, Note, SampleBlock, Table
from flowkit.synth.wav import wav_bytes


def _add_probe(run: Path, gains: list[float]) -> None:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    records.append({"kind": "probe_ceiling", "step": 0, "probe_truth_vocoded_wer": 0.3, "probe_truth_raw_wer": 0.25,
                    "probe_s": 1.0})
    for k, (step, gain) in enumerate(zip((0, 10, 20), gains, strict=True)):
        records.append({"kind": "probe", "step": step, "probe_wer": 1.0 - 0.3 * k, "probe_cer": 0.9 - 0.3 * k,
                        "probe_text_gain": gain, "probe_s": 2.0})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for sub, step in (("best", 20), ("latest", 20)):
        folder = run / "probe" / sub
        folder.mkdir(parents=True)
        (folder / "a.wav").write_bytes(wav_bytes(np.zeros(1600, np.float32), 16000))
        doc = {"step": step, "values": {"probe_wer": 0.4}, "sentences": [
            {"segment_id": "a", "language": "en", "reference": "press one", "hypothesis": "press won",
             "prompt": "b", "audio": "a.wav"}]}
        (folder / "sentences.json").write_text(json.dumps(doc))


def _section(doc, title: str):
    return next(s for s in doc.sections if s.title.startswith(title))


def test_probe_curve_ceilings_and_sentences(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _add_probe(run, [0.0, 0.01, 0.05])
    section = _section(build_document([run]), "Intelligibility")
    figures = [b for b in section.blocks if isinstance(b, Figure)]
    assert [f.name for f in figures] == ["probe_wer.png", "text_gain.png"]
    notes = " ".join(b.text for b in section.blocks if isinstance(b, Note))
    assert "best 0.400 (step 20)" in notes and "ground truth through the vocoder 0.300" in notes
    assert "1.33x" in notes and "recorded ground truth 0.250" in notes
    assert "The model uses its text" in notes
    tables = [b for b in section.blocks if isinstance(b, Table)]
    assert [t.rows[0][1:] for t in tables] == [["press one", "press won"]] * 2
    samples = [b for b in section.blocks if isinstance(b, SampleBlock)]
    assert len(samples) == 2 and samples[0].audios[0][1].wav.startswith(b"RIFF")
    files = write_report([run])
    assert "press won" in files.markdown.read_text() and (run / "report_files" / "probe_wer.png").is_file()


def test_report_says_when_the_text_is_not_used(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _add_probe(run, [0.0, -0.01, -0.002])
    notes = " ".join(b.text for b in _section(build_document([run]), "Intelligibility").blocks if isinstance(b, Note))
    assert "does not use its text yet" in notes and "-0.002" in notes


def test_no_probe_and_no_text_gain_means_no_section(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", val=False)
    assert not [s for s in build_document([run]).sections if s.title.startswith("Intelligibility")]
