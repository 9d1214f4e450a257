"""The intelligibility probe during training: its records, its determinism, and that it
never touches the training streams (a resume with the probe on is bit-identical)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import gin
import numpy as np
import pytest
import torch
from state_compare import TIMING, assert_same_tensors, final_state
from train_helpers import SignalAt, train

from flowkit.data.demo import demo_store_path
from flowkit.errors import ConfigError
from flowkit.train import run

#: A tiny model on the bundled real English speech, probed every 2 steps on 2 sentences
#: with 4 solver steps (seconds, not minutes).
PROBE = (
    "Trainer.probe = @Probe()",
    "Probe.every = 2",
    "Probe.sentences = 2",
    "Probe.split = 'train'",
    "Probe.solver_steps = 4",
)


def _records(run_dir: Path, kinds: tuple[str, ...] = ("train", "eval", "probe", "probe_ceiling")) -> list[dict]:
    out = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] in kinds:
            out.append({k: v for k, v in record.items() if k not in TIMING | {"probe_s"}})
    return out


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("probe") / "run"
    assert train(demo_store_path(), out, *PROBE, steps=4).status == "completed"
    return out


def test_probe_records_and_files(probed: Path) -> None:
    recs = _records(probed)
    ceiling = [r for r in recs if r["kind"] == "probe_ceiling"]
    probes = [r for r in recs if r["kind"] == "probe"]
    assert len(ceiling) == 1 and ceiling[0]["probe_sentences"] == 2
    assert 0.0 <= ceiling[0]["probe_truth_vocoded_wer/en"] <= 1.5
    assert [r["step"] for r in probes] == [0, 2, 4]
    for r in probes:
        assert {"probe_wer", "probe_cer", "probe_wer/en", "probe_cer/en", "probe_text_gain"} <= set(r)
        # the eval extra is installed (dev): Whisper, resemblyzer and DNSMOS judge, and say so
        assert {"probe_sim", "probe_sim_ref", "probe_dnsmos", "probe_dnsmos_sig", "probe_dnsmos_bak"} <= set(r)
        assert -1.0 <= r["probe_sim"] <= 1.0 and 1.0 <= r["probe_dnsmos"] <= 5.0
        assert r["judges"] == ceiling[0]["judges"]
    judges = ceiling[0]["judges"]
    assert judges["asr"]["name"] == "asr.whisper" and judges["asr"]["model"] == "Systran/faster-whisper-tiny.en"
    assert judges["speaker"]["name"] == "speaker.resemblyzer" and judges["quality"]["name"] == "quality.dnsmos"
    assert all(judges[k]["version"] for k in judges)
    # the recordings against their prompts' recordings: the same speaker, clean speech
    # (SIM measured 0.56 on these two 1-2 s clips: GE2E is weak on so little speech)
    assert ceiling[0]["probe_truth_raw_sim"] > 0.3 and ceiling[0]["probe_truth_raw_dnsmos"] > 2.0
    assert {"probe_truth_vocoded_sim", "probe_truth_vocoded_sim_ref", "probe_truth_vocoded_dnsmos"} <= set(ceiling[0])
    raw = [json.loads(line) for line in (probed / "metrics.jsonl").read_text().splitlines()]
    assert all(r["probe_s"] > 0 for r in raw if r["kind"] in ("probe", "probe_ceiling"))
    # probe/latest is laid out as a flowkit eval folder: its records, their totals, the WAVs
    latest = probed / "probe" / "latest"
    summary = json.loads((latest / "summary.json").read_text())
    records = [json.loads(line) for line in (latest / "results.jsonl").read_text().splitlines()]
    assert summary["step"] == 4 and len(records) == 2 and summary["judges"] == judges
    for row in records:
        assert row["text"] and row["hypothesis"] is not None and row["asr"].startswith("asr.whisper")
        assert row["wer"] is not None and row["error_metric"] == "wer"
        assert isinstance(row["sim"], float) and isinstance(row["dnsmos"], float)
        assert (latest / row["audio"]).stat().st_size > 1000
    # the totals pool the first draw's records as flowkit eval pools its results
    from flowkit.judges.records import totals

    assert summary["totals"] == totals(records) and summary["totals"]["generated"]["items"] == 2
    if summary["values"]["probe_wer"] is not None:  # one draw: the logged WER is the records' pooled WER
        assert summary["totals"]["generated"]["wer"] == pytest.approx(summary["values"]["probe_wer"], abs=1e-12)
    assert (probed / "probe" / "best" / "summary.json").is_file()
    evals = [r for r in recs if r["kind"] == "eval"]
    assert all(r["text_gain"] == pytest.approx(r["val_loss_ema_notext"] - r["val_loss_ema"]) for r in evals)


def test_resume_with_the_probe_on_is_bit_identical(probed: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    original = run._loggers
    with monkeypatch.context() as m:
        m.setattr(run, "_loggers", lambda settings: [*original(settings), SignalAt(2)])
        assert train(demo_store_path(), out, *PROBE, "Trainer.save_every = 2", steps=4).status == "interrupted"
    gin.clear_config()
    assert run.resume(out, device="cpu").status == "completed"
    assert_same_tensors(final_state(probed), final_state(out))
    assert _records(probed) == _records(out)


def test_probe_is_deterministic_and_leaves_global_generators_alone(probed: Path) -> None:
    from flowkit import registry
    from flowkit.data.dataset import LatentDataset
    from flowkit.synth.inference import load_inference_model
    from flowkit.synth.vocoders import GriffinLim
    from flowkit.train.probe import ProbeRunner, ProbeSettings

    registry.load_plugins()
    from flowkit.checkpoints import files as checkpoint

    newest, _ = checkpoint.find_latest(probed / "checkpoints")
    im = load_inference_model(newest, weights="ema")
    data = LatentDataset.open(list(im.stores), "train")
    settings = ProbeSettings(sentences=2, split="train", solver_steps=4)
    runner = ProbeRunner(settings, data, stats=im.stats, vocab=im.vocab, languages=im.languages,
                         schedule=im.schedule, solver=im.solver, vocoder=GriffinLim(), encoder=dict(im.encoder),
                         run_seed=0, device="cpu")
    data.close()
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state())
    first = runner.probe(im.model)
    second = runner.probe(im.model)
    after = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state())
    assert before[0] == after[0] and np.array_equal(before[1], after[1]) and torch.equal(before[2], after[2])
    first.pop("probe_s"), second.pop("probe_s")
    assert first == second
    # the in-training probe of the last step saw the same EMA weights
    logged = [r for r in _records(probed) if r["kind"] == "probe" and r["step"] == 4][0]
    assert logged["probe_wer"] == first["probe_wer"] and logged["probe_cer"] == first["probe_cer"]


def test_probe_conditions_on_the_recorded_labels(probed: Path) -> None:
    """The model never trains on "unknown" rate and loudness buckets (every prepared clip has
    them), so the probe gives each sentence the labels it was recorded with."""
    from flowkit import registry
    from flowkit.checkpoints import files as checkpoint
    from flowkit.data.dataset import LatentDataset
    from flowkit.synth.inference import load_inference_model
    from flowkit.synth.vocoders import GriffinLim
    from flowkit.train.probe import ProbeRunner, ProbeSettings

    registry.load_plugins()
    newest, _ = checkpoint.find_latest(probed / "checkpoints")
    im = load_inference_model(newest, weights="ema")
    data = LatentDataset.open(list(im.stores), "train")
    segments = {s.segment_id: s for s in data.segments}
    runner = ProbeRunner(ProbeSettings(sentences=2, split="train", solver_steps=4), data, stats=im.stats,
                         vocab=im.vocab, languages=im.languages, schedule=im.schedule, solver=im.solver,
                         vocoder=GriffinLim(), encoder=dict(im.encoder), run_seed=0, device="cpu")
    data.close()
    utterances = runner._utterances()
    assert len(utterances) == 2
    for sentence, u in zip(runner.sentences, utterances, strict=True):
        seg = segments[sentence.segment_id]
        assert (u.rate, u.loudness) == (seg.rate, seg.loudness)
        assert u.rate > 0 and u.loudness > 0


def test_probe_pools_its_noise_draws(probed: Path) -> None:
    from flowkit import registry
    from flowkit.checkpoints import files as checkpoint
    from flowkit.data.dataset import LatentDataset
    from flowkit.synth.inference import load_inference_model
    from flowkit.synth.vocoders import GriffinLim
    from flowkit.train.probe import ProbeRunner, ProbeSettings

    registry.load_plugins()
    newest, _ = checkpoint.find_latest(probed / "checkpoints")
    im = load_inference_model(newest, weights="ema")
    data = LatentDataset.open(list(im.stores), "train")
    real = registry.build("asr", "pocketsphinx")
    heard = []

    class Counting:  # the real recogniser, counting what it hears
        languages = real.languages

        def transcribe(self, audio, sr, language):
            heard.append(len(audio))
            return real.transcribe(audio, sr, language)

    settings = ProbeSettings(asr=Counting(), sentences=2, split="train", solver_steps=4, draws=3)
    runner = ProbeRunner(settings, data, stats=im.stats, vocab=im.vocab, languages=im.languages,
                         schedule=im.schedule, solver=im.solver, vocoder=GriffinLim(), encoder=dict(im.encoder),
                         run_seed=0, device="cpu")
    data.close()
    values = runner.probe(im.model)
    assert len(heard) == 6  # 2 sentences x 3 draws, all scored
    assert len(runner.last_hypotheses) == 2 and len(runner.last_audio) == 2 and len(runner.last_records) == 2
    assert 0.0 <= values["probe_wer"] and 0.0 <= values["probe_cer"] <= 1.5
    with pytest.raises(ConfigError, match="Probe.draws = 0"):
        ProbeSettings(draws=0)


def test_a_default_recogniser_that_fails_on_first_use_is_turned_off_a_named_one_stops(probed: Path, capsys,
                                                                                     monkeypatch) -> None:
    """The probe scores with the eval's panel: a default judge whose model turns out missing is
    one note, its scores are left out, and the probe (and the run) go on; a judge the config
    names stops the run with the reason instead."""
    from flowkit import registry
    from flowkit.checkpoints import files as checkpoint
    from flowkit.data.dataset import LatentDataset
    from flowkit.judges import choice
    from flowkit.synth.inference import load_inference_model
    from flowkit.synth.vocoders import GriffinLim
    from flowkit.train.probe import ProbeRunner, ProbeSettings

    registry.load_plugins()
    newest, _ = checkpoint.find_latest(probed / "checkpoints")
    im = load_inference_model(newest, weights="ema")
    calls = []

    class Missing:
        languages = ("en",)

        def transcribe(self, audio, sr, language):
            calls.append(language)
            raise ConfigError("asr.missing: no model at /models/none")

    def runner(settings):
        data = LatentDataset.open(list(im.stores), "train")
        try:
            return ProbeRunner(settings, data, stats=im.stats, vocab=im.vocab, languages=im.languages,
                               schedule=im.schedule, solver=im.solver, vocoder=GriffinLim(),
                               encoder=dict(im.encoder), run_seed=0, device="cpu")
        finally:
            data.close()

    named = runner(ProbeSettings(asr=Missing(), speaker=None, quality=None, sentences=2, split="train",
                                 solver_steps=2))
    with pytest.raises(ConfigError, match="the asr judge Missing cannot run here: asr.missing: no model"):
        named.probe(im.model)
    monkeypatch.setattr(choice, "default_recognizer", lambda language="en": Missing())
    monkeypatch.setattr(choice, "whisper_unavailable", lambda language="en": None)
    probe = runner(ProbeSettings(speaker=None, quality=None, sentences=2, split="train", solver_steps=2))
    calls.clear()
    first = probe.probe(im.model)
    second = probe.probe(im.model)
    assert len(calls) == 1  # off after its first failure: never asked again
    assert "probe_wer" not in first and "probe_wer" not in second and first["judges"]["asr"] is None
    out = capsys.readouterr().out
    assert out.count("asr judge off (asr.missing: no model at /models/none); its scores are empty") == 1
    assert "transcribed by Missing" in out and "no recogniser (it is off)" in out  # the first probe, the second
    assert [r["hypothesis"] for r in probe.last_records] == [None, None]
    assert ProbeRunner.improves(None, probed / "probe" / "best") is False  # a best is kept: no WER is no better


def test_which_probe_becomes_the_best(tmp_path: Path) -> None:
    from flowkit.train.probe import ProbeRunner

    whisper = {"name": "asr.whisper", "model": "Systran/faster-whisper-tiny.en", "version": "1"}
    best = tmp_path / "best"
    assert ProbeRunner.improves(0.5, best, whisper)  # none kept
    best.mkdir()
    (best / "summary.json").write_text(json.dumps({"values": {"probe_wer": 0.4}, "judges": {"asr": whisper}}))
    assert not ProbeRunner.improves(0.5, best, whisper) and ProbeRunner.improves(0.3, best, whisper)
    assert not ProbeRunner.improves(None, best, whisper)  # no WER (the recogniser off) is no better
    # another recogniser's WER is not comparable: the first probe it hears becomes the best
    assert ProbeRunner.improves(0.9, best, {"name": "asr.pocketsphinx", "model": "en-us", "version": "5"})
    (best / "summary.json").write_text(json.dumps({"values": {}, "judges": {"asr": None}}))
    assert ProbeRunner.improves(0.9, best, whisper)  # the kept one has no WER


def test_probe_settings_refuse_bad_values() -> None:
    from flowkit.train.probe import ProbeSettings

    with pytest.raises(ConfigError, match="Probe.split = 'test'"):
        ProbeSettings(split="test")
    with pytest.raises(ConfigError, match="Probe.every = 0"):
        ProbeSettings(every=0)
    with pytest.raises(ConfigError, match="not a recogniser"):
        ProbeSettings(asr=object())


def test_probe_judges_default_and_turn_off(monkeypatch) -> None:
    import importlib.util

    from flowkit.train.probe import ProbeSettings

    both = ProbeSettings()
    assert both.asr.describe()["name"] == "asr.whisper" and both.notes == ()
    assert both.speaker.describe()["name"] == "speaker.resemblyzer"
    assert both.quality.describe()["name"] == "quality.dnsmos"
    off = ProbeSettings(speaker=None, quality=None)
    assert off.speaker is None and off.quality is None and off.notes == ()
    real = importlib.util.find_spec
    missing = {"faster_whisper", "resemblyzer", "speechmos"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n in missing else real(n, *a))
    fallback = ProbeSettings()
    assert fallback.asr.describe()["name"] == "asr.pocketsphinx"
    assert fallback.speaker is None and fallback.quality is None
    assert fallback.notes == (
        "asr: asr.pocketsphinx, not Whisper (asr.whisper needs the faster-whisper package: "
        "pip install 'flowkit[eval]')",
        "no SIM: speaker.resemblyzer needs resemblyzer: pip install 'flowkit[eval]'",
        "no DNSMOS: quality.dnsmos needs speechmos: pip install 'flowkit[eval]'",
    )
    with pytest.raises(ConfigError, match="Probe.speaker = 'x' is not a speaker judge"):
        ProbeSettings(speaker="x")
