"""``flowkit eval`` end to end on a tiny random-weight checkpoint and real recordings.

The checkpoint is gin/debug.gin's model size (``model.dit.preset = 'tiny'``) with fresh
weights, saved in the trainer's format inside a run directory (training it would take a
minute on two shared cores; eval does not care what the weights learned). The test list is
three lines of meta.lst over the bundled demo recordings (flowkit/demo/clips, allison).
The judges are whatever is installed (pocketsphinx at least); a judge that is missing
leaves its column null, which the equality checks cover as well as numbers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from flowkit.cli.app import app
from flowkit.evaluation.folder import read_results
from flowkit.evaluation.run import evaluate
from flowkit.evaluation.settings import EvalSettings
from flowkit.evaluation.testset import read_testset
from flowkit.judges.panel import Judges, build_judges

REPO = Path(__file__).resolve().parents[2]
CLIPS = REPO / "flowkit" / "demo" / "clips" / "wavs"
# (utt, prompt clip, prompt text, target text, target clip): allison's own sentences
LINES = [
    ("u1", "allison_en_conf-muted", "You are now muted.", "Call forwarding.", "allison_en_call-forwarding"),
    ("u2", "allison_en_call-forwarding", "Call forwarding.", "You are now muted.", "allison_en_conf-muted"),
    ("u3", "allison_en_conf-muted", "You are now muted.", "Agent logged off.", "allison_en_agent-loggedoff"),
]
FAST = ["--nfe", "2", "--cfg", "1.0", "--samples", "2"]  # 2 ODE steps: the loop, not the quality, is tested


def _meta_lst(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "meta.lst"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _good_lines(folder: Path) -> list[str]:
    rel = os.path.relpath(CLIPS, folder)
    return [f"{u}|{pt}|{rel}/{p}.flac|{t}|{rel}/{tw}.flac" for u, p, pt, t, tw in LINES]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory with one random-weight checkpoint of the tiny preset (log-mel latents)."""
    from flowkit.checkpoints.files import save_checkpoint
    from flowkit.data.encoders import LogMel
    from flowkit.model.dit import DiTConfig
    from flowkit.text.chars import build_vocab

    root = tmp_path_factory.mktemp("run")
    enc = LogMel()
    torch.manual_seed(0)
    vocab = build_vocab([t for _, _, pt, t, _ in LINES for t in (pt, t)])
    cfg = DiTConfig(preset="tiny")  # gin/debug.gin's model
    state = cfg.build(enc.latent_dim, vocab.size, 1).state_dict()
    meta = {"config_text": "", "latent_stats": {"mean": [-4.0] * enc.latent_dim, "std": [2.0] * enc.latent_dim,
                                                "n_frames": 1},
            "vocab": vocab.state_dict(), "languages": ["en"], "model_config": cfg.to_dict(),
            "latent_dim": enc.latent_dim, "frame_rate": enc.frame_rate, "sample_rate": enc.sample_rate,
            "stores": [], "encoder": {"name": "log_mel", "params": enc.params()}}
    save_checkpoint(root / "checkpoints", 4, {"model": state, "ema": {"num_updates": 0, "shadow": state}}, meta)
    (root / "config.gin").write_text("include 'debug.gin'\n")
    return root


@pytest.fixture(scope="module")
def judges():
    """The default judges (Whisper, resemblyzer, DNSMOS where installed), loaded once."""
    return build_judges()


@pytest.fixture(scope="module")
def no_judges():
    """No judge at all (every score column null): for tests about the audio and the files."""
    return Judges(asr=None)


@pytest.fixture(scope="module")
def testset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lists") / "en"
    return _meta_lst(folder, _good_lines(folder))


@pytest.fixture(scope="module")
def reference(run_dir: Path, testset: Path, judges, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted eval through the CLI."""
    out = tmp_path_factory.mktemp("evals") / "reference"
    result = CliRunner().invoke(app, ["eval", str(run_dir), "--testset", str(testset), "--out", str(out), *FAST])
    assert result.exit_code == 0, result.output
    return out


def _lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text(encoding="utf-8").splitlines()


def test_three_lines_end_to_end(reference: Path) -> None:
    records = [json.loads(x) for x in _lines(reference)]
    assert [r["utt"] for r in records] == ["u1", "u2", "u3"]
    for r in records:
        for key in ("utt", "audio", "text", "hypothesis", "wer", "cer", "sim", "dnsmos", "duration_ratio",
                    "truth", "vocoded"):
            assert key in r, key
        assert (reference / r["audio"]).is_file()
        assert r["hypothesis"] is not None and r["wer"] is not None  # pocketsphinx at least is installed
        assert r["truth"]["wer"] is not None and r["vocoded"]["wer"] is not None  # both ceilings judged
        assert r["duration_ratio"] > 0
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["items"] == 3 and summary["rejected"] == 0
    assert set(summary["totals"]) >= {"generated", "truth", "vocoded"}
    assert summary["judges"]["asr"]["name"]  # the judge is named
    html = (reference / "eval.html").read_text()
    assert html.count("<audio controls") == 2 * 3  # --samples 2: generated, prompt, target each
    md = (reference / "eval.md").read_text()
    assert "## Totals" in md and "recordings through the vocoder (ceiling)" in md
    assert (reference / "wavs" / "u1.wav").is_file() and "(../wavs/u1.wav)" not in md


def test_killed_and_continued_gives_the_same_results(run_dir: Path, testset: Path, judges, tmp_path: Path,
                                                     interrupt_after) -> None:
    """Stopped after the first result, with a torn line left behind, then run again: the
    same results.jsonl and WAVs as an eval never interrupted."""
    settings = EvalSettings(nfe=2, cfg=1.0, samples=2, ceilings=False)
    # the default recogniser and the speaker model; DNSMOS (the slowest judge) is covered above
    judges = Judges(asr=judges.asr, speaker=judges.speaker)
    reference = evaluate(run_dir, testset, tmp_path / "whole", settings=settings, judges=judges, progress=False).out
    out = tmp_path / "killed"
    from flowkit.evaluation import run as eval_run

    interrupt_after(eval_run, 1)
    with pytest.raises(KeyboardInterrupt):
        evaluate(run_dir, testset, out, settings=settings, judges=judges, progress=False)
    assert len(_lines(out)) == 1
    with open(out / "results.jsonl", "a", encoding="utf-8") as f:
        f.write('{"utt": "u2", "audio": "wa')  # a kill in the middle of the second line
    outcome = evaluate(run_dir, testset, out, settings=settings, judges=judges, progress=False)
    assert (outcome.evaluated, outcome.skipped) == (2, 1)
    assert _lines(out) == _lines(reference)
    for utt in ("u1", "u2", "u3"):
        assert (out / "wavs" / f"{utt}.wav").read_bytes() == (reference / "wavs" / f"{utt}.wav").read_bytes()
    # a third run has nothing left to do
    again = evaluate(run_dir, testset, out, settings=settings, judges=judges, progress=False)
    assert (again.evaluated, again.skipped) == (0, 3) and _lines(out) == _lines(reference)


@pytest.mark.slow
def test_sigkill_mid_eval_then_rerun_of_the_same_command(reference: Path, run_dir: Path, testset: Path,
                                                         tmp_path: Path) -> None:
    """A real kill -9 of ``flowkit eval`` after its first result line; the same command again."""
    out = tmp_path / "sigkill"
    command = [sys.executable, "-m", "flowkit", "eval", str(run_dir), "--testset", str(testset), "--out", str(out),
               *FAST]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if results.is_file() and results.read_bytes().count(b"\n") >= 1:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    assert results.is_file(), proc.stderr.read().decode() if proc.stderr else ""
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert rerun.returncode == 0, rerun.stderr
    assert _lines(out) == _lines(reference)


def test_deterministic_from_the_seed_and_independent_of_order(run_dir: Path, testset: Path, no_judges,
                                                              tmp_path: Path) -> None:
    """Each utterance's noise comes from (seed, utt): reversing the list changes nothing
    for any line, another seed changes the audio."""
    import soundfile as sf

    settings = EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False)
    lines = testset.read_text().splitlines()
    reversed_list = _meta_lst(testset.parent / "reversed", [])
    rel = os.path.relpath(testset.parent, reversed_list.parent)
    reversed_list.write_text("".join(
        "|".join(f"{rel}/{x}" if k in (2, 4) else x for k, x in enumerate(line.split("|"))) + "\n"
        for line in reversed(lines)))
    a = evaluate(run_dir, testset, tmp_path / "a", settings=settings, judges=no_judges, progress=False)
    b = evaluate(run_dir, reversed_list, tmp_path / "b", settings=settings, judges=no_judges, progress=False)
    c = evaluate(run_dir, testset, tmp_path / "c", settings=EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False,
                                                                         seed=1, limit=1),
                 judges=no_judges, progress=False)
    ra = {r["utt"]: r for r in read_results(a.out / "results.jsonl")}
    rb = {r["utt"]: r for r in read_results(b.out / "results.jsonl")}
    for utt in ra:
        assert (a.out / "wavs" / f"{utt}.wav").read_bytes() == (b.out / "wavs" / f"{utt}.wav").read_bytes()
        assert {k: v for k, v in ra[utt].items() if k not in ("line", "prompt_wav", "target_wav")} == \
               {k: v for k, v in rb[utt].items() if k not in ("line", "prompt_wav", "target_wav")}
    x, _ = sf.read(str(a.out / "wavs" / "u1.wav"))
    y, _ = sf.read(str(c.out / "wavs" / "u1.wav"))
    assert x.shape != y.shape or abs(x - y).max() > 1e-3  # another seed, other noise, other audio


def test_a_batch_of_three_agrees_with_one_at_a_time(run_dir: Path, testset: Path, no_judges, tmp_path: Path) -> None:
    """Three utterances of different lengths in one padded, masked call: the same audio as
    one call each up to float rounding. Tolerance 1e-3 of full scale (about 30 int16 steps):
    the padding only reorders float32 sums (relative error ~1e-6), which 2 Euler steps and
    Griffin-Lim carry into the waveform without growing them by orders of magnitude."""
    import numpy as np
    import soundfile as sf

    one = evaluate(run_dir, testset, tmp_path / "one", settings=EvalSettings(nfe=2, cfg=1.0, samples=0,
                   ceilings=False), judges=no_judges, progress=False)
    three = evaluate(run_dir, testset, tmp_path / "three", settings=EvalSettings(nfe=2, cfg=1.0, samples=0,
                     ceilings=False, batch=3), judges=no_judges, progress=False)
    lengths = set()
    for utt in ("u1", "u2", "u3"):
        x, _ = sf.read(str(one.out / "wavs" / f"{utt}.wav"))
        y, _ = sf.read(str(three.out / "wavs" / f"{utt}.wav"))
        assert x.shape == y.shape
        assert float(np.abs(x - y).max()) < 1e-3
        lengths.add(x.shape[0])
    assert len(lengths) > 1  # the batch was padded


def test_bad_lines_are_rejected_with_their_line_numbers(run_dir: Path, tmp_path: Path, no_judges, capsys) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    good = _good_lines(folder)
    (folder / "broken.wav").write_bytes(b"RIFF not really a wav")
    rel = os.path.relpath(CLIPS, folder)
    lines = [
        good[0],                                                           # 1 fine
        "u2|only three|fields",                                            # 2 wrong field count
        f"u3|You are now muted.|{rel}/nope.flac|Call forwarding.",         # 3 missing prompt wav
        "u4|You are now muted.|broken.wav|Call forwarding.",               # 4 undecodable prompt wav
        f"u5|You are now muted.|{rel}/allison_en_conf-muted.flac|  ",      # 5 empty text
        good[1],                                                           # 6 fine
    ]
    path = _meta_lst(folder, lines)
    ts = read_testset(path, language="en", languages=["en"])
    assert [(r.line, r.reason) for r in ts.rejections] == [
        (2, "bad_fields"), (3, "bad_prompt_wav"), (4, "bad_prompt_wav"), (5, "empty_text")]
    assert [i.utt for i in ts.items] == ["u1", "u2"]
    # a language the model lacks: every line of a meta.lst has --language
    assert {r.reason for r in read_testset(path, language="fr", languages=["en"]).rejections} >= {"unknown_language"}
    evaluate(run_dir, path, tmp_path / "o", settings=EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False),
             judges=no_judges, progress=False)
    assert "meta.lst:3 (u3): bad_prompt_wav" in capsys.readouterr().out.replace("\n", "")
    rejected = [json.loads(x) for x in (tmp_path / "o" / "rejections.jsonl").read_text().splitlines()]
    assert [r["line"] for r in rejected] == [2, 3, 4, 5]
    assert [json.loads(x)["utt"] for x in (tmp_path / "o" / "results.jsonl").read_text().splitlines()] == ["u1", "u2"]


def test_a_manifest_pairs_prompts_by_speaker_and_rejects_by_line(tmp_path: Path) -> None:
    """A flowkit manifest: a line's own prompt_audio, else the next line of its speaker; a
    speaker with one line has no prompt; a language the model lacks is rejected."""
    rel = os.path.relpath(CLIPS, tmp_path)
    rows = [
        {"id": "a", "audio": f"{rel}/allison_en_conf-muted.flac", "text": "You are now muted.", "speaker": "allison"},
        {"id": "b", "audio": f"{rel}/allison_en_call-forwarding.flac", "text": "Call forwarding.",
         "speaker": "allison"},
        {"id": "c", "audio": f"{rel}/allison_en_agent-loggedoff.flac", "text": "Agent logged off.",
         "speaker": "allison", "language": "fr"},
        {"id": "d", "audio": f"{rel}/allison_en_agent-loggedoff.flac", "text": "Agent logged off.", "speaker": "solo"},
        {"id": "e", "audio": f"{rel}/allison_en_agent-loggedoff.flac", "text": "Agent logged off.", "speaker": "solo2",
         "prompt_audio": f"{rel}/allison_en_conf-muted.flac", "prompt_text": "You are now muted."},
    ]
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    ts = read_testset(path, language="en", languages=["en"])
    assert ts.format == "manifest"
    by_utt = {i.utt: i for i in ts.items}
    assert sorted(by_utt) == ["a", "b", "e"]
    assert (by_utt["a"].prompt_wav.name == "allison_en_call-forwarding.flac"
            and by_utt["a"].prompt_text == "Call forwarding.")
    assert by_utt["b"].prompt_wav.name == "allison_en_agent-loggedoff.flac"  # the next line of its speaker
    assert by_utt["e"].prompt_text == "You are now muted." and by_utt["e"].target_wav.name.endswith("loggedoff.flac")
    assert [(r.line, r.reason) for r in ts.rejections] == [(3, "unknown_language"), (4, "missing_prompt"),
                                                           (6, "bad_line")]


def test_every_line_bad_exits_3_in_one_line(run_dir: Path, tmp_path: Path) -> None:
    path = _meta_lst(tmp_path / "allbad", ["a|b", "c|d|e"])
    result = CliRunner().invoke(app, ["eval", str(run_dir), "--testset", str(path), "--out", str(tmp_path / "o"),
                                      *FAST])
    assert result.exit_code == 3, result.output
    errors = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "every line was rejected" in errors[0]



@pytest.mark.parametrize("body", ["", "\n  \n\n"])
def test_a_list_without_lines_is_named_empty(body: str, run_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "meta.lst"
    path.write_text(body)
    result = CliRunner().invoke(app, ["eval", str(run_dir), "--testset", str(path), "--out", str(tmp_path / "o"),
                                      *FAST])
    assert result.exit_code == 3, result.output
    errors = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "no test lines" in errors[0] and "(0" not in errors[0], result.output


def test_a_continued_eval_samples_with_the_kernel_it_recorded(run_dir: Path, testset: Path, no_judges, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               interrupt_after) -> None:
    """The first part of an eval records its sampling kernels in eval.json; a continued eval
    samples with them whatever this process would choose (its remaining utterances are the bits
    an unbroken eval makes); an eval.json from before kernels were recorded makes no choice."""
    from flowkit.converters import cpu as cpu_kernels

    seen = []
    real = cpu_kernels.sampling_kernels

    def spy(model, *, recorded=None, **kw):
        seen.append(recorded)
        return real(model, recorded=recorded, **kw)

    monkeypatch.setattr(cpu_kernels, "sampling_kernels", spy)
    settings = EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False)
    out = tmp_path / "o"
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "mkl")
    monkeypatch.setenv("FLOWKIT_CPU_GROUPED_CONV", "channels_last")
    recorded = {"linear": "mkl", "grouped_conv": "channels_last", "onednn_min_rows": 512}
    from flowkit.evaluation import run as eval_run

    interrupt_after(eval_run, 1)
    with pytest.raises(KeyboardInterrupt):
        evaluate(run_dir, testset, out, settings=settings, judges=no_judges, progress=False)
    assert json.loads((out / "eval.json").read_text())["cpu_kernels"] == recorded
    monkeypatch.setenv("FLOWKIT_CPU_LINEAR", "onednn")
    monkeypatch.setenv("FLOWKIT_CPU_GROUPED_CONV", "onednn")
    outcome = evaluate(run_dir, testset, out, settings=settings, judges=no_judges, progress=False)
    assert seen == [None, recorded] and outcome.evaluated == 2
    assert outcome.summary["cpu_kernels"] == recorded
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    identity = json.loads((out / "eval.json").read_text())
    del identity["cpu_kernels"]
    (legacy / "eval.json").write_text(json.dumps(identity))
    assert evaluate(run_dir, testset, legacy, settings=settings, judges=no_judges, progress=False).evaluated == 3
    assert len(seen) == 2 and "cpu_kernels" not in json.loads((legacy / "eval.json").read_text())


def test_other_settings_in_the_same_folder_are_refused(run_dir: Path, testset: Path, no_judges,
                                                       tmp_path: Path) -> None:
    settings = EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False, limit=1)
    evaluate(run_dir, testset, tmp_path / "o", settings=settings, judges=no_judges, progress=False)
    result = CliRunner().invoke(app, ["eval", str(run_dir), "--testset", str(testset), "--out", str(tmp_path / "o"),
                                      *FAST, "--no-ceilings", "--seed", "7"])
    assert result.exit_code == 4, result.output
    assert "seed = 0, not 7" in result.output.replace("\n", "")


def test_default_out_is_under_the_run_and_the_report_lists_it(run_dir: Path, testset: Path, no_judges) -> None:
    from flowkit.report.build import build_document
    from flowkit.report.render_md import render_markdown

    outcome = evaluate(run_dir, testset, settings=EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False, limit=1),
                       judges=no_judges, progress=False)
    assert outcome.out == run_dir.resolve() / "evals" / "en-step4"
    md = render_markdown(build_document([run_dir]))
    assert "## Evaluations" in md and "en-step4" in md


def test_a_missing_judge_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge whose plugin is not installed leaves its column null and says which extra to install."""
    import numpy as np

    from flowkit import registry
    from flowkit.errors import RegistryError

    real_build = registry.build

    def build(kind: str, name: str, **kwargs):
        if kind in ("speaker", "quality"):
            raise RegistryError(f"no {kind} named {name!r}")
        return real_build(kind, name, **kwargs)

    monkeypatch.setattr(registry, "build", build)
    j = build_judges(asr="pocketsphinx")
    assert j.speaker is None and j.quality is None
    assert len(j.notes) == 2 and all("pip install 'flowkit[eval]'" in n for n in j.notes)
    assert "speaker.resemblyzer" in j.notes[0] and "quality.dnsmos" in j.notes[1]
    assert j.describe()["speaker"] is None
    silence = np.zeros(1600, dtype=np.float32)
    assert j.similarity(silence, 16000, silence, 16000) is None and j.quality_scores(silence, 16000) is None


# ---- one writer per folder, the write policy ------------------------------------------------


def test_a_second_eval_into_one_folder_is_refused_naming_the_first(run_dir: Path, testset: Path, no_judges,
                                                                    tmp_path: Path) -> None:
    """Two evals into one --out would each write every utterance: the second is refused."""
    from flowkit.errors import DataError

    out = tmp_path / "busy"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from flowkit.data.locks import StoreLock; "
         "StoreLock.acquire(Path(sys.argv[1]) / 'eval', 'x', 'y', command='eval'); print('held', flush=True); "
         "time.sleep(60)", str(out)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DataError, match=rf"eval folder {out} is being written by pid {holder.pid}, "
                                            r".*\(eval.lock\); .*another --out"):
            evaluate(run_dir, testset, out, settings=EvalSettings(nfe=2, cfg=1.0), judges=no_judges, progress=False)
        assert [p.name for p in out.iterdir()] == ["eval.lock"]  # the holder's: nothing written
    finally:
        holder.kill()
        holder.wait()


def test_a_full_disk_during_an_eval_is_one_write_error(run_dir: Path, testset: Path, no_judges, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from flowkit.errors import WriteError
    from flowkit.evaluation import run as eval_run

    def full(path, record):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(eval_run, "_append", full)
    out = tmp_path / "ev"
    with pytest.raises(WriteError, match=rf"--out {out}: cannot write .*results.jsonl: the disk is full") as info:
        evaluate(run_dir, testset, out, settings=EvalSettings(nfe=2, cfg=1.0, limit=1), judges=no_judges,
                 progress=False)
    assert info.value.exit_code == 6
    assert not (out / "eval.lock").exists()  # released


# ---- long and unspeakable inputs, as synthesize handles them ----------------------------------


def test_texts_outside_the_vocabulary_are_rejected_or_warned(run_dir: Path, tmp_path: Path, no_judges,
                                                             capfd: pytest.CaptureFixture) -> None:
    """A target the model cannot spell at all (another script, only zero-width spaces) is a
    rejection with its line; one with a few unknown characters is evaluated with a warning."""
    folder = tmp_path / "scripts"
    folder.mkdir()
    rel = os.path.relpath(CLIPS, folder)
    prompt = f"{rel}/allison_en_conf-muted.flac"
    lines = [f"u1|You are now muted.|{prompt}|\u65e5\u672c\u8a9e",            # 1 another script
             f"u2|You are now muted.|{prompt}|\u200b\u200b\u200b",              # 2 zero-width spaces only
             f"u3|You are now muted.|{prompt}|Call forwarding \u00e6\u00f8.",   # 3 two unknown letters
             f"u4|You are now muted.|{prompt}|Call forwarding."]                # 4 fine
    capfd.readouterr()
    evaluate(run_dir, _meta_lst(folder, lines), tmp_path / "o", judges=no_judges, progress=False,
             settings=EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False))
    err = capfd.readouterr().err.replace("\n", "")
    rejected = [json.loads(x) for x in (tmp_path / "o" / "rejections.jsonl").read_text().splitlines()]
    assert [(r["line"], r["reason"]) for r in rejected] == [(1, "text_outside_vocabulary"),
                                                            (2, "text_outside_vocabulary")]
    assert "\\u200b" in rejected[1]["detail"]
    assert "meta.lst:3 (u3): its text: 2 of" in err and "not in the model's vocabulary" in err, err
    assert [r["utt"] for r in read_results(tmp_path / "o" / "results.jsonl")] == ["u3", "u4"]


def test_a_long_target_is_split_into_pieces_and_a_long_prompt_is_cut(run_dir: Path, tmp_path: Path, no_judges,
                                                                      monkeypatch: pytest.MonkeyPatch, capfd) -> None:
    """With one piece of speech capped at 3 s (synthesize's MAX_SECONDS, lowered to keep this
    fast), a target of about 5 s is generated in pieces with a line for each; a 16 s prompt is
    cut to synthesize's prompt maximum with its text, and said in a warning."""
    import soundfile as sf

    from flowkit.synth import synthesize as synth_module

    folder = tmp_path / "long"
    folder.mkdir()
    clip, sr = sf.read(str(CLIPS / "allison_en_conf-muted.flac"), dtype="float32")
    pause = np.zeros(int(0.4 * sr), dtype=np.float32)
    long_prompt = np.concatenate([np.concatenate([clip, pause])] * 20)[: int(16.5 * sr)]
    sf.write(str(folder / "long.wav"), long_prompt, sr)
    rel = os.path.relpath(CLIPS, folder)
    settings = EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False)
    lines = ["u2|" + " ".join(["You are now muted."] * 12) + "|long.wav|Call forwarding."]
    capfd.readouterr()
    evaluate(run_dir, _meta_lst(folder / "a", [lines[0].replace("|long.wav|", "|../long.wav|")]), tmp_path / "a",
             judges=no_judges, progress=False, settings=settings)
    err = capfd.readouterr().err.replace("\n", "")
    assert "warning: u2: prompt " in err and "longer than the 15 s prompt maximum" in err, err
    assert [r["utt"] for r in read_results(tmp_path / "a" / "results.jsonl")] == ["u2"]

    monkeypatch.setattr(synth_module, "MAX_SECONDS", 3.0)
    lines = [f"u1|You are now muted.|{rel}/allison_en_conf-muted.flac|"
             "Call forwarding. You are now muted. Agent logged off. Call forwarding."]
    evaluate(run_dir, _meta_lst(folder, lines), tmp_path / "o", judges=no_judges, progress=False, settings=settings)
    said = capfd.readouterr()
    pieces = [line for line in said.out.splitlines() if line.startswith("u1: about ") and "piece " in line]
    assert len(pieces) >= 2 and pieces[-1].endswith(f"piece {len(pieces)}/{len(pieces)}"), said.out
    (record,) = read_results(tmp_path / "o" / "results.jsonl")
    assert record["frames"] > 3.0 * 100  # longer than one piece: the pieces were joined


def test_a_recording_with_nan_samples_is_a_rejection(run_dir: Path, tmp_path: Path) -> None:
    import soundfile as sf

    folder = tmp_path / "nan"
    folder.mkdir()
    wave = np.zeros(16000, dtype=np.float32)
    wave[100] = np.nan
    sf.write(str(folder / "nan.wav"), wave, 16000, subtype="FLOAT")
    rel = os.path.relpath(CLIPS, folder)
    lines = ["u1|You are now muted.|nan.wav|Call forwarding.",
             f"u2|You are now muted.|{rel}/allison_en_conf-muted.flac|Call forwarding.|nan.wav"]
    ts = read_testset(_meta_lst(folder, lines), language="en", languages=["en"])
    assert [(r.line, r.reason) for r in ts.rejections] == [(1, "bad_prompt_wav"), (2, "bad_target_wav")]
    assert all("1 of 16000 samples are NaN or infinite" in r.detail for r in ts.rejections)


def test_an_utt_too_long_for_a_file_name_is_a_rejection(tmp_path: Path) -> None:
    folder = tmp_path / "ids"
    folder.mkdir()
    rel = os.path.relpath(CLIPS, folder)
    lines = [f"{'u' * 300}|You are now muted.|{rel}/allison_en_conf-muted.flac|Call forwarding.",
             f"a\\b|You are now muted.|{rel}/allison_en_conf-muted.flac|Call forwarding.",
             f"ok|You are now muted.|{rel}/allison_en_conf-muted.flac|Call forwarding."]
    ts = read_testset(_meta_lst(folder, lines), language="en", languages=["en"])
    assert [(r.line, r.reason) for r in ts.rejections] == [(1, "bad_utt"), (2, "bad_utt")]
    assert "300 bytes" in ts.rejections[0].detail and [i.utt for i in ts.items] == ["ok"]


def test_a_long_target_recording_gets_a_line_before_its_ceilings(run_dir: Path, testset: Path, no_judges,
                                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capfd: pytest.CaptureFixture) -> None:
    """Judging a long recording raw and vocoded takes minutes: a line says so first (the
    threshold lowered to the demo clips' length to keep this fast)."""
    from flowkit.evaluation import run as eval_run

    monkeypatch.setattr(eval_run, "LONG_RECORDING_SECONDS", 0.5)
    capfd.readouterr()
    evaluate(run_dir, testset, tmp_path / "o", judges=no_judges, progress=False,
             settings=EvalSettings(nfe=2, cfg=1.0, samples=0, limit=1))
    out = capfd.readouterr().out.replace("\n", "")
    assert "u1: judging its 2 s target recording raw and vocoded (the ceilings; --no-ceilings skips them)" in out, out


def test_a_hub_test_list_is_one_line_naming_the_local_folder_it_needs() -> None:
    from flowkit.errors import DataError

    for given in ("hf://org/seed-tts-eval/en/meta.lst", Path("hf://org/seed-tts-eval/en/meta.lst")):
        with pytest.raises(DataError) as info:
            read_testset(given)
        text = str(info.value)
        assert "\n" not in text and text.startswith("--testset hf://org/seed-tts-eval/en/meta.lst: ")
        assert "hf download org/seed-tts-eval --repo-type dataset" in text


def test_an_eval_continues_when_its_record_names_fewer_fields_of_a_judge(tmp_path: Path) -> None:
    """A judge matches on the fields both identity records hold; a different model is refused."""
    import json

    from flowkit.errors import ResumeError
    from flowkit.evaluation.folder import IDENTITY, check_identity

    whisper = {"name": "asr.whisper", "model": "Systran/faster-whisper-tiny.en", "version": "faster-whisper 1.2.1"}
    (tmp_path / IDENTITY).write_text(json.dumps({"seed": 0, "judges": {"asr": whisper, "speaker": None}}))
    check_identity(tmp_path, {"seed": 0, "judges": {"asr": {**whisper, "decoding": "beam 1"}, "speaker": None}})
    # the refusal names the judge that differs and the --asr that continues
    with pytest.raises(ResumeError, match="other judges: asr asr.whisper Systran/faster-whisper-tiny.en, now "
                                         "asr.whisper base; --asr whisper continues it; give another --out"):
        check_identity(tmp_path, {"seed": 0, "judges": {"asr": {**whisper, "model": "base"}, "speaker": None}})
    with pytest.raises(ResumeError, match=r"other judges: speaker none, now asr.whisper Systran.*; give another"):
        check_identity(tmp_path, {"seed": 0, "judges": {"asr": whisper, "speaker": whisper}})


def test_lines_scored_while_a_judge_was_off_are_redone_on_resume(run_dir: Path, testset: Path, tmp_path: Path,
                                                                 capsys) -> None:
    """A default recogniser that fails on first use is turned off with a line printed at once;
    a rerun with a recogniser that works redoes the lines it left unscored."""
    class Heard:
        installed = False

        def transcribe(self, audio, sr, language):
            if not self.installed:
                raise ImportError("faster_whisper is not installed")
            return "hello"

    settings = EvalSettings(nfe=2, cfg=1.0, samples=0, ceilings=False, limit=2)
    out = tmp_path / "ev"
    first = evaluate(run_dir, testset, out, settings=settings, judges=Judges(asr=Heard()), progress=False)
    assert first.evaluated == 2 and first.summary["totals"]["generated"]["wer"] is None
    assert capsys.readouterr().out.count("asr judge off (faster_whisper is not installed)") == 1
    Heard.installed = True
    again = evaluate(run_dir, testset, out, settings=settings, judges=Judges(asr=Heard()), progress=False)
    assert (again.evaluated, again.skipped) == (2, 0)  # both redone: scored now
    records = {r["utt"]: r for r in read_results(out / "results.jsonl")}
    assert [r["hypothesis"] for r in records.values()] == ["hello", "hello"]
    assert again.summary["totals"]["generated"]["wer"] is not None
    third = evaluate(run_dir, testset, out, settings=settings, judges=Judges(asr=Heard()), progress=False)
    assert (third.evaluated, third.skipped) == (0, 2)
