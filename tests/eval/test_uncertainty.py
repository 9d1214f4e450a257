"""Evaluation figures with their interval (flowkit.evaluation.uncertainty, flowkit.evaluation.seeds):
the bootstrap against a plain reference and scipy on fixed tables, and ``--seeds`` end to end
on a tiny random-weight checkpoint with stand-in judges."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from flowkit.errors import ConfigError
from flowkit.evaluation.uncertainty import Interval, bootstrap, differs

# a fixed table: 8 utterances x 3 seeds of word errors, and the words of each utterance
EDITS = np.array([[1, 2, 1], [0, 0, 1], [3, 2, 4], [0, 1, 0], [2, 2, 2], [1, 0, 0], [0, 0, 0], [5, 3, 4]], float)
WORDS = np.array([[6] * 3, [4] * 3, [9] * 3, [5] * 3, [7] * 3, [3] * 3, [2] * 3, [11] * 3], float)


def _reference(num: np.ndarray, den: np.ndarray, resamples: int, seed: int, confidence: float = 0.95):
    """The two-way bootstrap written out: the same draws, one resampled table at a time."""
    rng = np.random.default_rng(seed)
    u, s = num.shape
    rows = rng.integers(0, u, size=(resamples, u))
    cols = rng.integers(0, s, size=(resamples, s))
    stats = [num[np.ix_(rows[r], cols[r])].sum() / den[np.ix_(rows[r], cols[r])].sum() for r in range(resamples)]
    a = (1 - confidence) / 2
    return np.quantile(stats, [a, 1 - a])


def test_the_interval_equals_the_written_out_reference_on_a_fixed_table() -> None:
    got = bootstrap(EDITS, WORDS, resamples=500, seed=3)
    low, high = _reference(EDITS, WORDS, 500, 3)
    assert got.mean == pytest.approx(EDITS.sum() / WORDS.sum())  # corpus WER: 34 edits / 141 words
    assert got.mean == pytest.approx(34 / 141)
    # the same draws summed in another order: equal to float rounding
    assert got.low == pytest.approx(low, rel=1e-12) and got.high == pytest.approx(high, rel=1e-12)
    assert (got.utterances, got.seeds) == (8, 3)
    assert bootstrap(EDITS, WORDS, resamples=500, seed=3) == got  # a fixed stream: the same interval


def test_one_seed_agrees_with_scipys_percentile_bootstrap_of_the_mean() -> None:
    from scipy import stats

    x = np.random.default_rng(1).normal(0.3, 0.1, size=50)
    got = bootstrap(x[:, None], resamples=20000)
    ref = stats.bootstrap((x,), np.mean, n_resamples=20000, method="percentile", random_state=0).confidence_interval
    width = ref.high - ref.low
    # two independent random streams of 20000 draws: their 2.5th/97.5th percentiles differ by
    # ~1-2 % of the width (measured 1.5 %); 5 % leaves room for any stream and still fails a
    # wrong resampling (no resampling at all gives width 0, resampling seeds only too)
    assert got.low == pytest.approx(ref.low, abs=0.05 * width)
    assert got.high == pytest.approx(ref.high, abs=0.05 * width)
    assert got.mean == pytest.approx(float(np.mean(x)))


def test_edge_tables_and_bad_input() -> None:
    flat = bootstrap(np.full((5, 2), 0.25))
    assert (flat.mean, flat.low, flat.high) == (0.25, 0.25, 0.25)
    with_nan = bootstrap(np.array([[1.0, np.nan], [3.0, 5.0]]), resamples=200)
    assert with_nan.mean == pytest.approx(3.0)  # the missing cell is left out of the sums
    with pytest.raises(ConfigError, match="a table of shape"):
        bootstrap(np.zeros(4))
    with pytest.raises(ConfigError, match="differ in shape"):
        bootstrap(EDITS, WORDS[:3])
    with pytest.raises(ConfigError, match="confidence 1.5"):
        bootstrap(EDITS, confidence=1.5)


def test_differs_when_the_intervals_do_not_overlap() -> None:
    a = Interval(0.27, 0.25, 0.29, 0.95, 50, 5)
    assert not differs(a, Interval(0.29, 0.27, 0.31, 0.95, 50, 5))
    assert differs(a, Interval(0.33, 0.30, 0.36, 0.95, 50, 5))


class _ASR:
    """Hears the same sentence in everything (WER then depends on the target only)."""

    languages = ("en",)

    def transcribe(self, audio, sample_rate, language="en"):
        return "you are now muted"

    def describe(self):
        return {"name": "asr.stand_in", "model": "fixed sentence", "version": "0"}


class _Quality:
    """A score that moves with the audio (so with the noise seed)."""

    def score(self, audio, sample_rate):
        level = float(np.sqrt(np.mean(np.square(audio)))) if audio.size else 0.0
        return {"ovrl": 3.0 + level, "sig": 3.0, "bak": 3.0}

    def describe(self):
        return {"name": "quality.stand_in", "model": "rms", "version": "0"}


def test_seeds_end_to_end_and_the_comparison(tmp_path: Path) -> None:
    from tiny_checkpoint import LOG_MEL_80, save_tiny_checkpoint

    from flowkit.evaluation.judges import Judges
    from flowkit.evaluation.seeds import SEEDS_FILE, compare_seed_files, evaluate_seeds
    from flowkit.evaluation.settings import EvalSettings

    clips = Path(__file__).resolve().parents[2] / "flowkit" / "demo" / "clips" / "wavs"
    lines = [("u1", "allison_en_conf-muted", "You are now muted.", "Call forwarding."),
             ("u2", "allison_en_call-forwarding", "Call forwarding.", "You are now muted."),
             ("u3", "allison_en_conf-muted", "You are now muted.", "Agent logged off.")]
    save_tiny_checkpoint(tmp_path / "run", [t for line in lines for t in line[2:]], encoder=LOG_MEL_80)
    (tmp_path / "run" / "config.gin").write_text("include 'debug.gin'\n")
    rel = os.path.relpath(clips, tmp_path)
    meta = tmp_path / "meta.lst"
    # each target's recording: the prompt's (the ceilings' judge is a stand-in)
    meta.write_text("".join(f"{u}|{pt}|{rel}/{p}.flac|{t}|{rel}/{p}.flac\n" for u, p, pt, t in lines))
    judges = Judges(asr=_ASR(), quality=_Quality())
    settings = EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=True)
    done = evaluate_seeds(tmp_path / "run", meta, tmp_path / "ev", [7, 8], settings=settings, judges=judges,
                          progress=False)
    saved = json.loads((tmp_path / "ev" / SEEDS_FILE).read_text())
    assert saved == json.loads(json.dumps(done.summary))
    assert sorted(p.name for p in (tmp_path / "ev").iterdir() if p.is_dir()) == ["seed-7", "seed-8"]
    protocol = saved["protocol"]
    assert protocol["seeds"] == [7, 8] and protocol["nfe"] == 2 and protocol["cfg"] == 1.0
    assert len(protocol["testset_sha256"]) == 64 and protocol["judges"]["asr"]["name"] == "asr.stand_in"
    assert "steps of" in protocol["model"]  # the solver as samples record it (with its sway where set)
    wer = saved["figures"]["generated"]["wer"]
    # every seed hears "you are now muted": 4 edits (2 substituted, 2 inserted) + 0 + 4 (3 + 1) over 2 + 4 + 3 words
    assert wer["mean"] == pytest.approx(8 / 9) and wer["low"] < wer["mean"] < wer["high"]
    assert wer["seeds"] == 2 and wer["utterances"] == 3
    # the recordings do not depend on the noise seed: judged once, in the first seed's folder
    def truth(seed: int) -> list:
        lines = (tmp_path / "ev" / f"seed-{seed}" / "results.jsonl").read_text().splitlines()
        return [json.loads(x).get("truth") for x in lines]

    first, again = truth(7), truth(8)
    assert all(first) and not any(again) and saved["figures"]["truth"]["wer"]["seeds"] == 1
    dnsmos = saved["figures"]["generated"]["dnsmos"]
    assert dnsmos["low"] <= dnsmos["mean"] <= dnsmos["high"]
    rows = compare_seed_files(saved, saved)
    assert {r["figure"] for r in rows} >= {"wer", "dnsmos"}
    assert all(not r["differs"] and r["same_protocol"] and r["difference"] == 0 for r in rows)
    with pytest.raises(ConfigError, match="two or more different seeds"):
        evaluate_seeds(tmp_path / "run", meta, tmp_path / "x", [1, 1], settings=settings, judges=judges)
    with pytest.raises(ConfigError, match="give --out"):
        evaluate_seeds(tmp_path / "run", meta, None, [1, 2], settings=settings, judges=judges)


def _seeds_json(folder: Path, wer: tuple[float, float, float], nfe: int = 32) -> None:
    folder.mkdir(parents=True)
    figure = {"mean": wer[0], "low": wer[1], "high": wer[2], "confidence": 0.95, "utterances": 50, "seeds": 5}
    (folder / "seeds.json").write_text(json.dumps({
        "figures": {"generated": {"wer": figure, "sim": {**figure, "mean": 0.8, "low": 0.79, "high": 0.81}}},
        "protocol": {"testset_sha256": "ab" * 32, "nfe": nfe, "cfg": 2.0, "judges": {}, "seeds": [0, 1, 2, 3, 4],
                     "items": 50, "step": 100}}))


def test_the_report_says_whether_two_runs_differ_beyond_the_intervals(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from flowkit.report.document import Note, Table
    from flowkit.report.evals import eval_blocks, seed_comparison_blocks

    _seeds_json(tmp_path / "a" / "evals" / "test-seeds5", (0.27, 0.25, 0.29))
    _seeds_json(tmp_path / "b" / "evals" / "test-seeds5", (0.35, 0.32, 0.38), nfe=16)
    a, b = (SimpleNamespace(path=tmp_path / n, label=n) for n in "ab")
    blocks = seed_comparison_blocks([a, b])
    table = next(x for x in blocks if isinstance(x, Table))
    rows = {r[0]: r for r in table.rows}
    assert rows["WER"][1] == "0.270 [0.250, 0.290]" and rows["WER"][3] == "+0.080"
    assert rows["WER"][4].startswith("yes") and rows["SIM"][4].startswith("no")
    assert any(isinstance(x, Note) and "nfe" in x.text for x in blocks)  # another protocol is named
    assert seed_comparison_blocks([a]) == []
    own = eval_blocks(a)[0]
    assert own.rows[0][4] == "0.270 [0.250, 0.290]" and "5 seeds" in own.rows[0][0]
