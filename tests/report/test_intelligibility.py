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
    # probe/latest as the trainer writes it (an eval folder: summary.json, results.jsonl, wavs/);
    # probe/best as a run that kept its sentences in sentences.json: the report reads both
    latest = run / "probe" / "latest"
    (latest / "wavs").mkdir(parents=True)
    (latest / "wavs" / "a.wav").write_bytes(wav_bytes(np.zeros(1600, np.float32), 16000))
    (latest / "summary.json").write_text(json.dumps({"step": 20, "values": {"probe_wer": 0.4}, "totals": {}}))
    (latest / "results.jsonl").write_text(json.dumps(
        {"utt": "a", "language": "en", "text": "press one", "hypothesis": "press won", "wer": 0.5, "prompt": "b",
         "audio": "wavs/a.wav"}) + "\n")
    best = run / "probe" / "best"
    best.mkdir(parents=True)
    (best / "a.wav").write_bytes(wav_bytes(np.zeros(1600, np.float32), 16000))
    doc = {"step": 20, "values": {"probe_wer": 0.4}, "sentences": [
        {"segment_id": "a", "language": "en", "reference": "press one", "hypothesis": "press won",
         "prompt": "b", "audio": "a.wav"}]}
    (best / "sentences.json").write_text(json.dumps(doc))


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
    assert [t.rows[0][1:] for t in tables] == [["press one", "press won"], ["press one", "press won", "0.500"]]
    assert tables[1].header[-1] == "WER"  # the latest probe's records score each sentence
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


def test_the_report_names_the_judges_and_plots_sim_and_dnsmos(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _add_probe(run, [0.0, 0.01, 0.05])
    judges = {"asr": {"name": "asr.whisper", "model": "Systran/faster-whisper-tiny.en",
                      "version": "faster-whisper 1.2.1"},
              "speaker": {"name": "speaker.resemblyzer", "model": "GE2E", "version": "resemblyzer 0.1.4"},
              "quality": None}
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for r in records:
        if r["kind"] == "probe_ceiling":
            r.update(judges=judges, probe_truth_raw_sim=0.81, probe_truth_vocoded_sim=0.74)
        elif r["kind"] == "probe":
            r.update(judges=judges, probe_sim=0.4 + r["step"] / 100)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    doc = json.loads((run / "probe" / "best" / "sentences.json").read_text())
    doc["sentences"][0]["sim"] = 0.55
    (run / "probe" / "best" / "sentences.json").write_text(json.dumps(doc))
    section = _section(build_document([run]), "Intelligibility")
    assert [f.name for f in section.blocks if isinstance(f, Figure)] == ["probe_wer.png", "probe_sim.png",
                                                                         "text_gain.png"]
    notes = " ".join(b.text for b in section.blocks if isinstance(b, Note))
    assert ("Judges: words heard by asr.whisper (Systran/faster-whisper-tiny.en, faster-whisper 1.2.1); "
            "speaker similarity by speaker.resemblyzer (GE2E, resemblyzer 0.1.4).") in notes
    assert ("latest 0.600 (step 20), best 0.600 (step 20); ground truth through the vocoder 0.740; "
            "ground truth, recorded 0.810") in notes
    best, latest = [b for b in section.blocks if isinstance(b, Table)]
    assert best.header[-1] == "SIM to prompt" and best.rows[0][-1] == "0.550"
    assert latest.header == ["segment", "reference", "hypothesis", "WER"]  # no SIM column: not judged there


def test_the_report_says_when_the_recogniser_changed(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _add_probe(run, [0.0, 0.01, 0.05])
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    whisper = {"name": "asr.whisper", "model": "Systran/faster-whisper-tiny.en", "version": "1"}
    sphinx = {"name": "asr.pocketsphinx", "model": "en-us", "version": "5"}
    for r in records:
        if r["kind"] in ("probe", "probe_ceiling"):
            r["judges"] = {"asr": sphinx if r["step"] == 20 else whisper}
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    notes = " ".join(b.text for b in _section(build_document([run]), "Intelligibility").blocks if isinstance(b, Note))
    assert ("The recogniser changed at step 20 (asr.whisper Systran/faster-whisper-tiny.en -> asr.pocketsphinx "
            "en-us): probe WERs before and after are not comparable") in notes
