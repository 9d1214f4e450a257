"""What the report concludes, and where it puts it: samples and figures above the config
dump, both probe ceilings visible when equal, no "best probe" at which nothing was heard,
and no "uses its text" verdict from the text gain alone (run files in the trainer's format)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from report_helpers import write_synthetic_run

from flowkit.report.build import build_document
from flowkit.report.document import Note
from flowkit.synth.wav import wav_bytes


def _append(run: Path, records: list[dict]) -> None:
    with (run / "metrics.jsonl").open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)


def _probes(run: Path, wers: list[float], *, ceilings: tuple[float, float] = (0.3, 0.25), gain: float = 0.026) -> None:
    vocoded, raw = ceilings
    _append(run, [{"kind": "probe_ceiling", "step": 0, "probe_truth_vocoded_wer": vocoded, "probe_truth_raw_wer": raw}]
            + [{"kind": "probe", "step": 10 * k, "probe_wer": w, "probe_cer": w, "probe_text_gain": gain}
               for k, w in enumerate(wers)])


def _best_folder(run: Path, step: int, wer: float, hypothesis: str) -> None:
    folder = run / "probe" / "best"
    folder.mkdir(parents=True)
    (folder / "a.wav").write_bytes(wav_bytes(np.zeros(1600, np.float32), 16000))
    (folder / "sentences.json").write_text(json.dumps({"step": step, "values": {"probe_wer": wer}, "sentences": [
        {"segment_id": "a", "language": "en", "reference": "press one", "hypothesis": hypothesis, "prompt": "b",
         "audio": "a.wav"}]}))


def _notes(run: Path) -> str:
    doc = build_document([run])
    section = next(s for s in doc.sections if s.title.startswith("Intelligibility"))
    return " ".join(b.text for b in section.blocks if isinstance(b, Note))


def test_samples_and_figures_sit_above_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flowkit.report import samples

    monkeypatch.setattr(samples, "sample_blocks", lambda *a, **k: [Note("a sample")])
    run = write_synthetic_run(tmp_path / "run", "completed")
    titles = [s.title for s in build_document([run], samples=1).sections]
    config = titles.index("Operative config (config.gin)")
    assert titles.index("Samples") < config and titles.index("Curves") < config
    assert titles[-2:] == ["Operative config (config.gin)", "About this report"]


def test_equal_ceilings_are_both_visible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: both ceilings dashed in the same style; at equal values the vocoded line hid
    under the recorded one. Now: different styles, the dashed one drawn on top, each labelled
    with its value."""
    from flowkit.report import intelligibility

    drawn = {}
    real = intelligibility.curves_png

    def spy(title, ylabel, curves, **kwargs):
        drawn[title] = list(curves)
        return real(title, ylabel, curves, **kwargs)

    monkeypatch.setattr(intelligibility, "curves_png", spy)
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _probes(run, [1.0, 0.6, 0.5], ceilings=(0.25, 0.25))
    build_document([run])
    ceilings = [c for c in drawn["probe WER and its ceilings"] if c.label.startswith("ground truth")]
    assert len(ceilings) == 2 and ceilings[0].values == ceilings[1].values
    assert ceilings[0].dashed != ceilings[1].dashed and ceilings[-1].dashed  # the top one shows the one below
    labels = [c.label for c in ceilings]
    assert labels == ["ground truth, recorded (0.250)", "ground truth through the vocoder (0.250 = recorded)"]


def test_best_probe_is_never_a_step_at_which_nothing_was_heard(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _probes(run, [1.0, 1.0, 1.25])
    _best_folder(run, 0, 1.0, "")
    notes = _notes(run)
    assert "no probe heard words yet (WER >= 1.0 at all 3 probes)" in notes
    assert "best 1.000" not in notes and "best / ceiling" not in notes
    assert "Best probe: no probe heard words yet (the best kept, at step 0, has WER 1.000" in notes
    assert "Best probe (step 0" not in notes


def test_a_hypothesis_without_a_word_is_not_heard(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _probes(run, [1.0, 1.0, 1.0])
    _best_folder(run, 0, 1.0, " . ")  # a recogniser's answer to noise
    assert "has WER 1.000 and 0 of 1 sentences heard" in _notes(run)


def test_best_probe_is_the_lowest_wer_among_probes_that_heard_words(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _probes(run, [1.0, 0.8, 0.9])
    _best_folder(run, 10, 0.8, "press")
    notes = _notes(run)
    assert "best 0.800 (step 10)" in notes and "Best probe (step 10, WER 0.800)" in notes


def test_text_gain_alone_is_no_verdict(tmp_path: Path) -> None:
    """Before: a random-weight import's report said "The model uses its text" from a text
    gain of +0.026 while its samples were noise."""
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _append(run, [{"kind": "eval", "step": 20, "val_loss_ema": 1.0, "text_gain": 0.026}])
    notes = _notes(run)
    assert "The model uses its text" not in notes
    assert "Cannot tell whether the model says its words" in notes and "0.026" in notes
    assert "Trainer.probe = @Probe()" in notes


def test_text_gain_with_a_probe_that_heard_nothing_says_not_yet(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", "completed", steps=20, total=20)
    _probes(run, [1.0, 1.0, 1.0], gain=0.026)
    notes = _notes(run)
    assert "The model uses its text" not in notes
    assert "The model does not say its words yet" in notes and "no probe heard words" in notes
