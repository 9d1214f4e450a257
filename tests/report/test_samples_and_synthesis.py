"""Samples in reports and `flowkit synthesize`, on a real tiny run (slow: it trains) and a
tiny aligned model checkpoint (fast)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from tiny_checkpoint import save_tiny_checkpoint
from typer.testing import CliRunner

from flowkit.cli.app import app
from flowkit.report.build import write_report
from flowkit.report.rundir import read_run
from flowkit.synth.synthesize import synthesize_file

HOP = 160  # encoder.log_mel default: 100 frames per second at 16 kHz
AUDIO_URI = re.compile(r'<audio [^>]*src="data:audio/wav;base64,[A-Za-z0-9+/=]{100,}"')


def _seconds_of(path: Path) -> tuple[int, int]:
    info = sf.info(str(path))
    return info.frames, info.samplerate


@pytest.mark.slow  # the real_run fixture trains for ~20 s on two cores
def test_real_run_reads_as_completed(real_run: Path) -> None:
    run = read_run(real_run)
    assert run.state == "completed" and run.step == 4
    assert run.best_checkpoint is not None and run.eval_records()


@pytest.mark.slow  # the real_run fixture trains for ~20 s on two cores
def test_report_samples_from_real_run(real_run: Path, tmp_path: Path) -> None:
    files = write_report([real_run], out=tmp_path / "rep", samples=2)
    md, html = files.markdown.read_text(), files.html.read_text()
    assert md.count("EMA weights, step 4 (best/step-00000004)") == 2
    assert "](report_files/sample1.png)" in md and (tmp_path / "rep/report_files/sample2-generated.wav").is_file()
    assert len(AUDIO_URI.findall(html)) == 4  # generated + ground truth, two samples
    frames, sr = _seconds_of(tmp_path / "rep/report_files/sample1-generated.wav")
    truth, _ = _seconds_of(tmp_path / "rep/report_files/sample1-truth.wav")
    assert sr == 16000 and frames == truth  # generated at the ground truth's length


@pytest.mark.slow  # the real_run fixture trains for ~20 s on two cores
def test_synthesize_with_given_seconds(real_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.wav"
    result = synthesize_file(real_run, "la mora", out, seconds=0.5, steps=2)
    assert result.frames == 50 and result.length_from == "--seconds"
    samples, sr = _seconds_of(out)
    assert sr == 16000 and abs(samples - 50 * HOP) <= HOP


@pytest.mark.slow  # the real_run fixture trains for ~20 s on two cores
def test_synthesize_cli_with_prompt(real_run: Path, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.wav"
    t = np.arange(8000) / 16000
    sf.write(prompt, (0.3 * np.sin(2 * np.pi * 200 * t)).astype(np.float32), 16000)
    out = tmp_path / "b.wav"
    result = CliRunner().invoke(app, ["synthesize", str(real_run), "--text", "la mora sun", "--out", str(out),
                                      "--prompt", str(prompt), "--prompt-text", "tie kell", "--steps", "2"])
    assert result.exit_code == 0, result.output
    # unaligned path: the prompt's 51 frames for 8 characters -> 11 characters
    assert "length from prompt frames per character" in result.output
    samples, _ = _seconds_of(out)
    assert abs(samples - round(51 * 11 / 8) * HOP) <= HOP


@pytest.mark.slow  # the real_run fixture trains for ~20 s on two cores
def test_synthesize_refuses_prompt_without_text(real_run: Path, tmp_path: Path) -> None:
    import numpy as np
    import soundfile as sf

    # a real prompt file: a missing one is refused first ("no such file", exit 3)
    sf.write(tmp_path / "p.wav", 0.1 * np.sin(np.arange(16000) * 0.05).astype(np.float32), 16000)
    result = CliRunner().invoke(app, ["synthesize", str(real_run), "--text", "la", "--out", str(tmp_path / "c.wav"),
                                      "--prompt", str(tmp_path / "p.wav")])
    assert result.exit_code == 2 and "needs --prompt-text" in result.output


@pytest.fixture
def aligned_checkpoint(tmp_path: Path) -> Path:
    """A tiny aligned-path model saved in the trainer's checkpoint format (untrained weights)."""
    return save_tiny_checkpoint(tmp_path, ["la mora sun tie kell"])


def test_synthesize_length_from_duration_head(aligned_checkpoint: Path, tmp_path: Path) -> None:
    from flowkit.synth.inference import load_inference_model
    from flowkit.synth.sample import Utterance, inference_conditions

    text = "la mora sun"
    im = load_inference_model(aligned_checkpoint)
    space = [i for i in im.vocab.encode(" ") if i > 1]
    cond = inference_conditions(im.model, [Utterance(text=im.vocab.encode(text), language=1)], separator_ids=space)
    expected = int(cond.target_mask.sum())
    out = tmp_path / "d.wav"
    result = synthesize_file(aligned_checkpoint, text, out, steps=2, language="en")
    assert result.length_from == "duration head" and result.frames == expected > 0
    samples, _ = _seconds_of(out)
    assert abs(samples - expected * HOP) <= HOP
    assert "EMA weights, step 3" in result.label


def test_synthesize_given_seconds_override_duration_head(aligned_checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "e.wav"
    result = synthesize_file(aligned_checkpoint, "la mora", out, seconds=0.5, steps=2)
    assert result.frames == 50 and result.length_from == "--seconds"
    samples, sr = _seconds_of(out)
    assert sr == 16000 and abs(samples - 50 * HOP) <= HOP


def test_synthesize_warns_about_a_language_the_model_never_saw(aligned_checkpoint: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["synthesize", str(aligned_checkpoint), "--text", "la mora", "--out",
                                      str(tmp_path / "l.wav"), "--steps", "2", "--language", "fr"])
    assert result.exit_code == 0, result.output
    assert "warning: --language 'fr': the model never saw it in training (languages: en)" in result.output
    known = synthesize_file(aligned_checkpoint, "la mora", tmp_path / "k.wav", steps=2, language="en")
    assert known.warnings == ()


def test_synthesize_names_a_checkpoint_path_that_does_not_exist(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["synthesize", str(tmp_path / "runs" / "e12"), "--text", "hi", "--out",
                                      str(tmp_path / "x.wav")])
    assert result.exit_code == 4
    assert "e12: no such checkpoint or run directory" in result.output
    assert not (tmp_path / "x.wav").exists()


def test_synthesis_reads_its_components_from_the_checkpoint_not_the_config(tmp_path: Path) -> None:
    """A run whose config names a component not installed here (a wandb-like logger of a
    plugin) still synthesises: schedule and solver come from meta["synthesis"]."""
    from flowkit.checkpoints.files import save_checkpoint
    from flowkit.model.dit import DiTConfig
    from flowkit.synth.inference import load_inference_model
    from flowkit.text.chars import build_vocab

    torch.manual_seed(0)
    vocab = build_vocab(["la mora"])
    cfg = DiTConfig(preset="tiny")
    state = cfg.build(80, vocab.size, 1).state_dict()
    meta = {"config_text": "Trainer.loggers = [@logger.not_installed_here()]\n",
            "latent_stats": {"mean": [0.0] * 80, "std": [1.0] * 80, "n_frames": 1},
            "vocab": vocab.state_dict(), "languages": ["en"], "model_config": cfg.to_dict(), "latent_dim": 80,
            "frame_rate": 100.0, "sample_rate": 16000, "stores": [],
            "synthesis": {"schedule": {"name": "cosine_vpred", "params": {}},
                          "solver": {"name": "midpoint", "params": {}}, "text": {"name": "chars", "params": {}}}}
    path = save_checkpoint(tmp_path / "checkpoints", 1, {"model": state, "ema": {"num_updates": 0, "shadow": state}},
                           meta)
    im = load_inference_model(path)
    assert type(im.schedule).__name__ == "CosineVPred" and type(im.solver).__name__ == "Midpoint"
    # the old way (parsing the run's config, for checkpoints without the record) fails on it:
    from flowkit.synth.inference import _legacy_components

    with pytest.raises(Exception, match="not_installed_here"):
        _legacy_components(meta["config_text"])


def test_synthesize_conditions_on_the_prompts_rate_and_loudness(aligned_checkpoint: Path, tmp_path: Path,
                                                               generated_utterances: list) -> None:
    """A prompt sets the speaking-rate and loudness buckets as prepare would label it (the model
    never trained on "unknown"); without a prompt they stay unknown (0)."""
    from flowkit.data import labels
    from flowkit.data.demo import demo_clips_path

    seen = generated_utterances
    clip = demo_clips_path() / "wavs" / "allison_en_agent-loggedoff.flac"
    words = "agent logged off"
    synthesize_file(aligned_checkpoint, "la mora", tmp_path / "p.wav", prompt=clip, prompt_text=words, steps=2,
                    language="en")
    synthesize_file(aligned_checkpoint, "la mora", tmp_path / "n.wav", steps=2, language="en")
    wave, sr = sf.read(str(clip), dtype="float32")
    wave = wave if wave.ndim == 1 else wave.mean(axis=1)
    import soxr

    wave = soxr.resample(wave, sr, 16000).astype(np.float32) if sr != 16000 else wave
    expected = labels.recorded_buckets(wave, 16000, words, 100.0, len(wave) // HOP + 1)
    assert (seen[0].rate, seen[0].loudness) == expected and expected[0] > 0 and expected[1] > 0
    assert (seen[1].rate, seen[1].loudness) == (0, 0)
