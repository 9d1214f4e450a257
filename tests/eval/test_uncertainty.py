"""Evaluation figures with their interval (flowkit.judges.uncertainty, flowkit.evaluation.seeds):
the bootstrap and the paired bootstrap of a difference against plain references and scipy on
fixed tables, the comparison of two seeds.json, and ``--seeds`` end to end on a tiny
random-weight checkpoint with stand-in judges."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from flowkit.errors import ConfigError
from flowkit.judges.uncertainty import Interval, SeedTable, bootstrap, compare, differs, paired_difference

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


# a fixed pair of tables: 6 utterances x 2 seeds of word errors by evals A and B, and the words
PAIR_A = np.array([[1, 2], [0, 0], [3, 2], [0, 1], [2, 2], [5, 3]], float)
PAIR_B = np.array([[0, 1], [0, 1], [2, 2], [0, 0], [1, 2], [4, 4]], float)
PAIR_WORDS = np.array([[6] * 2, [4] * 2, [9] * 2, [5] * 2, [7] * 2, [11] * 2], float)


def _paired_reference(a: np.ndarray, b: np.ndarray, den: np.ndarray, resamples: int, seed: int, same_seeds: bool,
                      confidence: float = 0.95):
    """The paired bootstrap written out: the implementation's integer draws (rows, A's columns,
    B's columns only when the seeds differ), then one resampled pair of tables at a time."""
    rng = np.random.default_rng(seed)
    u, s = a.shape
    rows = rng.integers(0, u, size=(resamples, u))
    cols_a = rng.integers(0, s, size=(resamples, s))
    cols_b = cols_a if same_seeds else rng.integers(0, s, size=(resamples, s))
    stats = []
    for r in range(resamples):
        fa = a[np.ix_(rows[r], cols_a[r])].sum() / den[np.ix_(rows[r], cols_a[r])].sum()
        fb = b[np.ix_(rows[r], cols_b[r])].sum() / den[np.ix_(rows[r], cols_b[r])].sum()
        stats.append(fb - fa)
    q = (1 - confidence) / 2
    return np.quantile(stats, [q, 1 - q])


@pytest.mark.parametrize("same_seeds", [True, False])
def test_the_paired_difference_equals_the_written_out_reference(same_seeds: bool) -> None:
    got = paired_difference(PAIR_A, PAIR_WORDS, PAIR_B, PAIR_WORDS, same_seeds=same_seeds, resamples=400, seed=5)
    low, high = _paired_reference(PAIR_A, PAIR_B, PAIR_WORDS, 400, 5, same_seeds)
    assert got.mean == pytest.approx(PAIR_B.sum() / PAIR_WORDS.sum() - PAIR_A.sum() / PAIR_WORDS.sum(), abs=1e-15)
    # the same draws; only the order of the float64 sums differs (counts x table against
    # indexing), so the two agree to rounding, far below 1e-12
    assert abs(got.low - low) < 1e-12 and abs(got.high - high) < 1e-12
    assert got.low < got.mean < got.high and (got.utterances, got.seeds) == (6, 2)
    if same_seeds:  # the draws are bootstrap's of the same seed: against a zero table, B's own interval
        alone = bootstrap(PAIR_B, PAIR_WORDS, resamples=400, seed=5)
        zero = paired_difference(0 * PAIR_A, PAIR_WORDS, PAIR_B, PAIR_WORDS, same_seeds=True, resamples=400, seed=5)
        assert (zero.low, zero.high) == (alone.low, alone.high)


def test_pairing_finds_a_small_shift_that_the_two_intervals_hide() -> None:
    rng = np.random.default_rng(0)
    # 40 utterances that differ a lot (a hard sentence is hard for both evals), 3 seeds each
    a = rng.uniform(0.0, 1.0, size=(40, 1)) + rng.normal(0.0, 0.02, size=(40, 3))
    b = a + 0.01
    ia, ib = bootstrap(a), bootstrap(b)
    assert not differs(ia, ib)  # each interval is ~0.18 wide: 0.01 apart they overlap
    paired = paired_difference(a, None, b, None, same_seeds=True)
    assert paired.mean == pytest.approx(0.01) and paired.low > 0  # the paired interval excludes 0
    assert paired.high - paired.low < 1e-9  # every draw differs by 0.01 exactly, up to rounding
    apart = paired_difference(a, None, b, None, same_seeds=False)  # seeds drawn apart: their noise enters
    assert apart.low < apart.mean < apart.high and apart.high - apart.low > 100 * (paired.high - paired.low)


def test_the_paired_difference_of_equal_tables_is_exactly_zero() -> None:
    with_nan = PAIR_A.copy()
    with_nan[2, 1] = np.nan
    for num, den in ((PAIR_A, PAIR_WORDS), (with_nan, PAIR_WORDS), (with_nan, None)):
        got = paired_difference(num, den, num, den, same_seeds=True, resamples=300)
        assert (got.mean, got.low, got.high) == (0.0, 0.0, 0.0)


def test_paired_difference_bad_input() -> None:
    with pytest.raises(ConfigError, match="eval A has 6 utterances and eval B 3"):
        paired_difference(PAIR_A, None, PAIR_B[:3], None, same_seeds=False)
    with pytest.raises(ConfigError, match="same_seeds with 2 seeds in eval A and 1 in eval B"):
        paired_difference(PAIR_A, None, PAIR_B[:, :1], None, same_seeds=True)
    assert paired_difference(PAIR_A, None, PAIR_B[:, :1], None, same_seeds=False).seeds == 1
    with pytest.raises(ConfigError, match="eval B: numerator .* differ in shape"):
        paired_difference(PAIR_A, None, PAIR_B, PAIR_WORDS[:2], same_seeds=True)
    with pytest.raises(ConfigError, match="resamples 0"):
        paired_difference(PAIR_A, None, PAIR_B, None, same_seeds=True, resamples=0)


def _seeds_dict(num: np.ndarray, den: np.ndarray | None, utts: list[str], seeds: list[int], *,
                tables: bool = True) -> dict:
    """A seeds.json content with one figure, WER, of the given table."""
    figure = bootstrap(num, den).to_dict()
    out = {"figures": {"generated": {"wer": figure}},
           "protocol": {"testset_sha256": "ab" * 32, "nfe": 32, "cfg": 2.0, "judges": {}, "seeds": seeds}}
    if tables:
        out["tables"] = {"generated": {"wer": SeedTable(tuple(utts), tuple(seeds), num, den).to_json()}}
    return json.loads(json.dumps(out))


def test_compare_pairs_the_tables_and_falls_back_to_overlap_without_them() -> None:
    utts = [f"u{i}" for i in range(6)]
    a, b = _seeds_dict(PAIR_A, PAIR_WORDS, utts, [0, 1]), _seeds_dict(PAIR_B, PAIR_WORDS, utts, [0, 1])
    (row,) = compare(a, b)
    assert row["rule"] == "paired" and row["shared"] == 6 and row["same_protocol"]
    assert row["paired"] == paired_difference(PAIR_A, PAIR_WORDS, PAIR_B, PAIR_WORDS, same_seeds=True)
    assert row["differs"] == (row["paired"].low > 0 or row["paired"].high < 0)
    assert row["difference"] == pytest.approx(row["paired"].mean)
    (same,) = compare(a, a)
    assert same["rule"] == "paired" and not same["differs"] and (same["paired"].low, same["paired"].high) == (0, 0)
    # other seeds: the columns are drawn apart
    other = _seeds_dict(PAIR_B, PAIR_WORDS, utts, [5, 6])
    assert compare(a, other)[0]["paired"] == paired_difference(PAIR_A, PAIR_WORDS, PAIR_B, PAIR_WORDS,
                                                               same_seeds=False)
    # B in another order with one utterance more and one less: matched by id, in A's order
    order = [3, 1, 0, 5, 2]
    moved = _seeds_dict(np.vstack([PAIR_B[order], [[9, 9]]]), np.vstack([PAIR_WORDS[order], [[9, 9]]]),
                        [utts[i] for i in order] + ["extra"], [0, 1])
    (row,) = compare(a, moved)
    keep = [0, 1, 2, 3, 5]
    assert row["shared"] == 5 and row["paired"] == paired_difference(PAIR_A[keep], PAIR_WORDS[keep], PAIR_B[keep],
                                                                     PAIR_WORDS[keep], same_seeds=True)
    # without tables (a seeds.json from an eval that did not write them): the overlap rule
    bare = _seeds_dict(PAIR_B, PAIR_WORDS, utts, [0, 1], tables=False)
    for x, y in ((a, bare), (bare, a), (bare, bare)):
        (row,) = compare(x, y)
        assert row["rule"] == "overlap" and row["paired"] is None and row["shared"] is None
        assert row["differs"] == differs(row["a"], row["b"])


def test_a_table_round_trips_through_json_with_its_missing_cells() -> None:
    num = PAIR_A.copy()
    num[1, 0] = np.nan
    data = json.loads(json.dumps(SeedTable(("a", "b", "c", "d", "e", "f"), (3, 4), num, PAIR_WORDS).to_json()))
    assert data["numerator"][1] == [None, 0.0] and data["seeds"] == [3, 4]
    back = SeedTable.from_json(data)
    assert back is not None and back.utts[0] == "a" and back.seeds == (3, 4)
    np.testing.assert_array_equal(back.numerator, num)  # NaN where it was
    np.testing.assert_array_equal(back.denominator, PAIR_WORDS)
    assert SeedTable.from_json({**data, "numerator": data["numerator"][:2]}) is None  # damaged: not a table
    assert SeedTable.from_json(None) is None


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

    from flowkit.evaluation.seeds import SEEDS_FILE, evaluate_seeds
    from flowkit.evaluation.settings import EvalSettings
    from flowkit.judges.panel import Judges

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
    # the tables the intervals were drawn from: utterances by seeds, words as the WER's denominator
    tables = saved["tables"]["generated"]["wer"]
    assert tables["utts"] == ["u1", "u2", "u3"] and tables["seeds"] == [7, 8]
    assert tables["denominator"] == [[2.0, 2.0], [4.0, 4.0], [3.0, 3.0]]
    assert saved["tables"]["truth"]["wer"]["seeds"] == [7]
    rows = compare(saved, saved)
    assert {r["figure"] for r in rows} >= {"wer", "dnsmos"}
    assert all(r["rule"] == "paired" and r["shared"] == 3 and not r["differs"] and r["same_protocol"]
               and r["difference"] == 0 and (r["paired"].low, r["paired"].high) == (0, 0) for r in rows)
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


def test_the_report_pairs_two_runs_evals_that_hold_their_tables(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from flowkit.report.document import Table
    from flowkit.report.evals import seed_comparison_blocks

    rng = np.random.default_rng(0)
    utts = [f"u{i}" for i in range(40)]
    a = rng.uniform(0.0, 1.0, size=(40, 1)) + rng.normal(0.0, 0.02, size=(40, 3))
    for name, table in (("a", a), ("b", a + 0.01)):
        folder = tmp_path / name / "evals" / "test-seeds3"
        folder.mkdir(parents=True)
        (folder / "seeds.json").write_text(json.dumps(_seeds_dict(table, None, utts, [0, 1, 2])))
    runs = [SimpleNamespace(path=tmp_path / n, label=n) for n in "ab"]
    (row,) = next(x for x in seed_comparison_blocks(runs) if isinstance(x, Table)).rows
    # the intervals of the two figures overlap; the paired interval of the difference does not hold 0
    assert row[0] == "WER" and row[3] == "+0.010 [+0.010, +0.010]"
    assert row[4] == "yes (paired: the difference's interval excludes 0)"


def _hard_six() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(edits, words)`` of A over 40 utterances x 3 seeds with 6 hard utterances, and B's: A's
    cells with the hard utterances not scored (null) under every seed."""
    rng = np.random.default_rng(0)
    words = rng.integers(3, 12, size=(40, 1)).repeat(3, axis=1).astype(float)
    edits = np.floor(words * rng.uniform(0.0, 0.2, size=(40, 3)))
    edits[:6] = np.floor(words[:6] * 0.8)
    b, b_words = edits.copy(), words.copy()
    b[:6], b_words[:6] = np.nan, np.nan
    return edits, words, b, b_words


def test_cells_scored_by_one_eval_only_are_left_out_of_both() -> None:
    edits, words, b, b_words = _hard_six()
    # each side's own rate: B's leaves out the hard utterances, so it looks better
    assert bootstrap(b, b_words).mean < bootstrap(edits, words).mean - 0.05
    got = paired_difference(edits, words, b, b_words, same_seeds=True)
    assert abs(got.mean) < 1e-12 and abs(got.low) < 1e-12 and abs(got.high) < 1e-12
    some = b.copy()
    some[6:9, 1] = np.nan  # one seed's cell of three more utterances: left out of A's sums too
    got = paired_difference(edits, words, some, words, same_seeds=True)
    assert (got.mean, got.low, got.high) == (0.0, 0.0, 0.0)
    apart = paired_difference(edits, words, b, b_words, same_seeds=False)  # the rows B lacks: out of A's
    assert abs(apart.mean) < 1e-12 and apart.low < 0 < apart.high
    utts = [f"u{i}" for i in range(40)]
    (row,) = compare(_seeds_dict(edits, words, utts, [0, 1, 2]), _seeds_dict(b, b_words, utts, [0, 1, 2]))
    assert row["rule"] == "paired" and not row["differs"] and abs(row["paired"].mean) < 1e-12


def test_an_uncomputable_paired_difference_falls_back_and_is_not_called_holds_0(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from flowkit.report.document import Table
    from flowkit.report.evals import seed_comparison_blocks

    utts = [f"u{i}" for i in range(6)]
    only = [np.where(np.arange(2) == k, PAIR_A, np.nan) for k in (0, 1)]  # A scores seed 0 only, B seed 1 only
    a, b = (_seeds_dict(x, PAIR_WORDS, utts, [0, 1]) for x in only)
    (row,) = compare(a, b)  # no cell scored in both: the paired interval is NaN
    assert row["rule"] == "overlap" and row["paired"] is None and row["differs"] == differs(row["a"], row["b"])
    empty = _seeds_dict(np.full((6, 2), np.nan), PAIR_WORDS, utts, [0, 1])  # no cell scored: NaN intervals
    (row,) = compare(empty, empty)
    assert (row["rule"], row["differs"], row["paired"]) == ("none", False, None)
    for name in "ab":
        folder = tmp_path / name / "evals" / "test"
        folder.mkdir(parents=True)
        (folder / "seeds.json").write_text(json.dumps(empty))
    runs = [SimpleNamespace(path=tmp_path / n, label=n) for n in "ab"]
    (row,) = next(x for x in seed_comparison_blocks(runs) if isinstance(x, Table)).rows
    assert row[3] == "-" and row[4] == "no (not computable)"


DAMAGE = [("tables", [1]), ("tables", "x"), ("protocol", None), ("protocol", []),
          ("figures.generated.wer.mean", None), ("figures.generated.wer.mean", True),
          ("figures.generated.wer.low", "0.1"), ("protocol.testset_sha256", ["ab"]), ("protocol.seeds", None),
          ("protocol.judges", "asr"), ("figures.generated", []), ("figures", "x")]


@pytest.mark.parametrize(("where", "value"), DAMAGE)
def test_a_damaged_seeds_json_is_left_out_with_a_note(tmp_path: Path, where: str, value: object) -> None:
    from types import SimpleNamespace

    from flowkit.report.document import Note
    from flowkit.report.evals import eval_blocks, seed_comparison_blocks

    utts = [f"u{i}" for i in range(6)]
    good = _seeds_dict(PAIR_A, PAIR_WORDS, utts, [0, 1])
    good["figures"]["generated"]["sim"] = {**good["figures"]["generated"]["wer"], "mean": 0.8, "low": 0.7, "high": 0.9}
    bad = json.loads(json.dumps(good))
    *parents, last = where.split(".")
    node = bad
    for key in parents:
        node = node[key]
    node[last] = value
    for name, data in (("a", good), ("b", bad)):
        folder = tmp_path / name / "evals" / "test"
        folder.mkdir(parents=True)
        (folder / "seeds.json").write_text(json.dumps(data))
    a, b = (SimpleNamespace(path=tmp_path / n, label=n) for n in "ab")
    compare(good, bad), compare(bad, good), compare(bad, bad)  # no exception
    own, both = eval_blocks(b), seed_comparison_blocks([a, b])
    assert seed_comparison_blocks([b, a]) is not None and eval_blocks(a)
    notes = [x.text for x in own + both if isinstance(x, Note)]
    if where.startswith("figures"):  # the file or its figure is left out, and said so, in both sections
        said = [x for x in notes if x.startswith(str(tmp_path / "b" / "evals" / "test" / "seeds.json"))]
        assert len(said) == 2 and all(x.endswith("left out") for x in said)
    if where.startswith("figures.generated.wer"):
        assert "figure wer is not an interval" in said[0] and own[0].rows[0][4] == "-"


def test_compare_takes_what_is_not_a_seeds_json_as_empty() -> None:
    a = _seeds_dict(PAIR_A, PAIR_WORDS, [f"u{i}" for i in range(6)], [0, 1])
    assert compare(a, None) == [] and compare([], a) == [] and compare("x", 3) == []
