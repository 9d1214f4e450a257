"""Choosing the vocoder (CLI, gin, checkpoint meta) and refusing latents it cannot invert.

Checkpoints here are tiny untrained models saved in the trainer's format with the meta a
run writes (fast); the end-to-end run on real clips is in test_vocos_end_to_end.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import soundfile as sf
import torch
from test_vocoders import CODEC, LOG_MEL, VOCOS_MEL
from typer.testing import CliRunner
from vocos_helpers import report_helpers, write_release

from flowkit.cli.app import app
from flowkit.data.encoder_records import vocoder_record
from flowkit.errors import ConfigError
from flowkit.synth.synthesize import synthesize_file
from flowkit.synth.vocoders import Vocos

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_release(tmp_path_factory.mktemp("vocos") / "vocos-mel-24khz")


def save_tiny_checkpoint(root: Path, encoder: dict | None, *, latent_dim: int, frame_rate: float, sample_rate: int,
                         vocoder: dict | None = None, mean: float = -4.0) -> Path:
    """A tiny unaligned model in the trainer's checkpoint format; ``encoder`` None: an old meta."""
    from flowkit.checkpoints.files import save_checkpoint
    from flowkit.model.dit import DiTConfig
    from flowkit.text.chars import build_vocab

    torch.manual_seed(0)
    vocab = build_vocab(["la mora sun tie kell"])
    cfg = DiTConfig(preset="tiny")
    state = cfg.build(latent_dim, vocab.size, 1).state_dict()
    meta = {"config_text": "", "latent_stats": {"mean": [mean] * latent_dim, "std": [1.0] * latent_dim, "n_frames": 1},
            "vocab": vocab.state_dict(), "languages": ["en"], "model_config": cfg.to_dict(), "latent_dim": latent_dim,
            "frame_rate": frame_rate, "sample_rate": sample_rate, "stores": [str(root / "moved-away.zarr")],
            "vocoder": vocoder}
    if encoder is not None:
        meta["encoder"] = encoder
    return save_checkpoint(root / "checkpoints", 3, {"model": state, "ema": {"num_updates": 0, "shadow": state}}, meta)


def _vocos_mel_ckpt(root: Path, **kw) -> Path:
    return save_tiny_checkpoint(root, VOCOS_MEL, latent_dim=100, frame_rate=24000 / 256, sample_rate=24000, **kw)


def test_synthesize_vocos_cli_writes_24khz(release: Path, tmp_path: Path) -> None:
    ckpt = _vocos_mel_ckpt(tmp_path)
    out = tmp_path / "v.wav"
    result = CliRunner().invoke(app, ["synthesize", str(ckpt), "--text", "la mora", "--out", str(out), "--steps", "2",
                                      "--seconds", "0.5", "--vocoder", "vocos", "--vocoder-path", str(release)])
    assert result.exit_code == 0, result.output
    frames = round(0.5 * 24000 / 256)
    info = sf.info(str(out))
    assert info.samplerate == 24000 and info.frames == (frames - 1) * 256
    flat = result.output.replace("\n", "")  # the console wraps long lines at spaces
    assert f"vocoder.vocos ({release})" in flat and "level as decoded" in flat
    audio, _ = sf.read(str(out), dtype="int16")
    assert 0 < abs(int(audio.astype(int).max())) < 32767 and int(audio.astype(int).min()) > -32768


def test_run_vocoder_from_meta_is_the_default(release: Path, tmp_path: Path) -> None:
    ckpt = _vocos_mel_ckpt(tmp_path, vocoder=vocoder_record(Vocos(path=str(release))))
    result = synthesize_file(ckpt, "la", tmp_path / "m.wav", steps=2, seconds=0.3)
    assert result.sample_rate == 24000 and result.vocoder.startswith("vocoder.vocos (")
    assert result.encoder_from == "checkpoint"  # its store "moved away": meta still holds the record
    # --vocoder overrides the run's choice: Griffin-Lim inverts vocos_mel too
    result = synthesize_file(ckpt, "la", tmp_path / "g.wav", steps=2, seconds=0.3,
                             vocoder=__import__("flowkit.synth.vocoders", fromlist=["GriffinLim"]).GriffinLim())
    assert result.sample_rate == 24000 and result.vocoder.startswith("vocoder.griffin_lim")


def test_vocos_on_log_mel_latents_is_refused_in_one_line(release: Path, tmp_path: Path) -> None:
    ckpt = save_tiny_checkpoint(tmp_path, LOG_MEL, latent_dim=80, frame_rate=100.0, sample_rate=16000)
    out = tmp_path / "x.wav"
    result = CliRunner().invoke(app, ["synthesize", str(ckpt), "--text", "la", "--out", str(out), "--steps", "2",
                                      "--vocoder-path", str(release)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "inverts encoder.vocos_mel (24000 Hz, hop 256, 100 bins, HTK mel)" in lines[0]
    assert "come from encoder.log_mel (16000 Hz, hop 160, 80 bins, Slaney mel)" in lines[0]
    assert not out.exists()


def test_griffin_lim_on_foreign_latents_is_refused(tmp_path: Path) -> None:
    ckpt = save_tiny_checkpoint(tmp_path, CODEC, latent_dim=64, frame_rate=75.0, sample_rate=24000)
    with pytest.raises(ConfigError, match=r"vocoder\.griffin_lim .* the latents of .* come from encoder\.codec_x"):
        synthesize_file(ckpt, "la", tmp_path / "y.wav", steps=2)
    result = CliRunner().invoke(app, ["synthesize", str(ckpt), "--text", "la", "--out", str(tmp_path / "y.wav")])
    assert result.exit_code == 2 and "choose a vocoder made for them" in result.output.replace("\n", "")


def test_old_checkpoint_without_encoder_says_it_guesses(tmp_path: Path) -> None:
    # a loud mel (mean log-magnitude 0.5): Griffin-Lim's audio passes full scale
    ckpt = save_tiny_checkpoint(tmp_path, None, latent_dim=80, frame_rate=100.0, sample_rate=16000, mean=0.5)
    result = CliRunner().invoke(app, ["synthesize", str(ckpt), "--text", "la", "--out", str(tmp_path / "o.wav"),
                                      "--steps", "2", "--seconds", "0.5"])
    assert result.exit_code == 0, result.output
    flat = result.output.replace("\n", "")
    assert "warning: the checkpoint records no encoder and its stores are gone" in flat
    # such output is not peak-normalised to full scale (a sample at -32768): the gain is
    # lowered to the -1 dBFS ceiling
    assert "lowered" in flat and "to the -1 dBFS peak ceiling" in flat
    pcm, _ = sf.read(str(tmp_path / "o.wav"), dtype="int16")
    assert abs(int(abs(pcm.astype(int)).max()) - 32768 * 10 ** (-1 / 20)) <= 2


def test_report_samples_refuse_a_vocoder_that_does_not_fit(release: Path, tmp_path: Path) -> None:
    run = report_helpers().write_synthetic_run(tmp_path / "run", "completed")
    for ckpt in (run / "best").iterdir():
        for f in ckpt.iterdir():
            f.unlink()
        ckpt.rmdir()
    save_tiny_checkpoint(tmp_path / "tmp", LOG_MEL, latent_dim=80, frame_rate=100.0, sample_rate=16000)
    (tmp_path / "tmp" / "checkpoints").rename(run / "best")
    result = CliRunner().invoke(app, ["report", str(run), "--samples", "1", "--vocoder", "vocos",
                                      "--vocoder-path", str(release), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "inverts encoder.vocos_mel" in result.output
    assert not (tmp_path / "rep" / "report.md").exists()


def test_training_refuses_a_vocoder_that_cannot_invert_its_store(release: Path, tmp_path: Path) -> None:
    from flowkit.train.run import train

    helpers = report_helpers()
    DEBUG_GIN = helpers.DEBUG_GIN
    store = helpers.write_logmel_store(tmp_path / "tones.zarr")
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=r"vocoder\.vocos \(.*\) inverts encoder\.vocos_mel .* the latents of "
                       r".*tones\.zarr come from encoder\.log_mel"):
        train([DEBUG_GIN], ["Trainer.loggers = []", "Trainer.vocoder = @vocoder.vocos()",
                            f"vocoder.vocos.path = '{release}'"], data=[store], out=out, steps=1, device="cpu")
    assert not (out / "checkpoints").exists() and not (out / "metrics.jsonl").exists()
