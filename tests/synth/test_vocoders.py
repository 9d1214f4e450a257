"""Vocoders declare what they invert and refuse the rest; decoded audio keeps its level, never clips."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from vocos_helpers import fixture, write_release

from flowkit.data.encoder_records import EncoderSpec, check_vocoder, describe_record, vocoder_record
from flowkit.errors import ConfigError, RegistryError
from flowkit.synth.level import PEAK_CEILING_DBFS, fit_level
from flowkit.synth.vocoders import GriffinLim, Vocos, choose_vocoder
from flowkit.synth.wav import wav_bytes

REPO = Path(__file__).resolve().parents[2]
CLIP = REPO / "flowkit" / "demo" / "clips"
LOG_MEL = {"name": "log_mel", "params": {"sample_rate": 16000, "n_fft": 1024, "win_length": 640, "hop_length": 160,
                                          "n_mels": 80, "fmin": 0.0, "fmax": None, "log_floor": 1e-5}}
VOCOS_MEL = {"name": "vocos_mel", "params": {"sample_rate": 24000, "n_fft": 1024, "win_length": 1024,
                                              "hop_length": 256, "n_mels": 100, "fmin": 0.0, "fmax": None,
                                              "log_floor": 1e-5}}
CODEC = {"name": "codec_x", "params": {"sample_rate": 24000, "hop_length": 320, "latent_dim": 64}}


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_release(tmp_path_factory.mktemp("vocos") / "vocos-mel-24khz")


def _speech(sample_rate: int) -> np.ndarray:
    """A real clip of the shared corpus (or the demo's bundled clips), resampled, peak 0.7."""
    import soxr

    candidates = sorted((REPO.parent / "shared" / "data" / "asterisk-5voice" / "wavs").glob("*.flac"))
    candidates += sorted(CLIP.rglob("*.flac")) + sorted(CLIP.rglob("*.wav"))
    if not candidates:
        pytest.skip("no real clip found (shared corpus or bundled clips)")
    audio, sr = sf.read(str(candidates[0]), dtype="float32", always_2d=True)
    audio = soxr.resample(audio.mean(axis=1), sr, sample_rate).astype(np.float32)
    return audio / np.abs(audio).max() * 0.7


def test_specs_describe_and_match() -> None:
    assert describe_record(LOG_MEL) == "encoder.log_mel (16000 Hz, hop 160, 80 bins, Slaney mel)"
    assert describe_record(VOCOS_MEL) == "encoder.vocos_mel (24000 Hz, hop 256, 100 bins, HTK mel)"
    spec = EncoderSpec("vocos_mel", {"sample_rate": 24000, "hop_length": 256, "n_mels": 100, "mel_scale": "htk"})
    assert spec.mismatch(VOCOS_MEL) is None
    assert spec.mismatch(LOG_MEL) == "encoder.log_mel, not encoder.vocos_mel"
    other = {"name": "vocos_mel", "params": {**VOCOS_MEL["params"], "hop_length": 300}}
    assert spec.mismatch(other) == "hop_length 300, not 256"


def test_griffin_lim_refuses_foreign_latents() -> None:
    with pytest.raises(ConfigError, match=r"vocoder\.griffin_lim \(32 iterations\) inverts encoder\.log_mel "
                       r"\(Slaney mel\) or encoder\.vocos_mel \(HTK mel\); the latents come from "
                       r"encoder\.codec_x \(24000 Hz, hop 320\): "
                       r"choose a vocoder made for them") as err:
        GriffinLim()(np.zeros((10, 64), np.float32), CODEC)
    assert "\n" not in str(err.value)


def test_vocos_refuses_log_mel_latents_and_other_settings(release: Path) -> None:
    vocos = Vocos(path=str(release))
    with pytest.raises(ConfigError, match=r"vocoder\.vocos \(.*vocos-mel-24khz\) inverts encoder\.vocos_mel "
                       r"\(24000 Hz, hop 256, 100 bins, HTK mel\); the latents come from encoder\.log_mel "
                       r"\(16000 Hz, hop 160, 80 bins, Slaney mel\)"):
        vocos(np.zeros((10, 80), np.float32), LOG_MEL)
    slower = {"name": "vocos_mel", "params": {**VOCOS_MEL["params"], "sample_rate": 22050}}
    with pytest.raises(ConfigError,
                       match=r"come from encoder\.vocos_mel \(22050 Hz, .*\) \(sample_rate 22050, not 24000\)"):
        check_vocoder(vocos, slower)
    with pytest.raises(ConfigError, match=r"vocoder\.vocos needs the Vocos directory .*--vocoder-path DIR"):
        Vocos()(np.zeros((10, 100), np.float32), VOCOS_MEL)


def test_a_vocoder_that_declares_nothing_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"does not declare the encoders it inverts"):
        check_vocoder(lambda latents, encoder: (latents, 1), LOG_MEL)


def test_vocos_component_decodes_batches_as_the_reference(release: Path) -> None:
    fx = fixture("published")
    lengths = [int(v) for v in fx["lengths"]]
    items = [fx["features"][i, :, :n].T for i, n in enumerate(lengths)]  # [n d] as latents
    ends = np.cumsum(fx["audio_lengths"])
    want = np.split(fx["audio"], ends[:-1])
    vocos = Vocos(path=str(release))
    audio, sr = vocos.decode(items, VOCOS_MEL)
    assert sr == 24000
    for got, ref in zip(audio, want, strict=True):
        assert got.shape == ref.shape and float(np.abs(got - ref).max()) <= 1e-4
    single, _ = vocos(items[2], VOCOS_MEL)
    assert single.shape == ((lengths[2] - 1) * 256,)
    assert vocos.decode([np.zeros((1, 100), np.float32)], VOCOS_MEL)[0][0].shape == (0,)


@pytest.mark.parametrize("record", [LOG_MEL, VOCOS_MEL], ids=["log_mel", "vocos_mel"])
def test_griffin_lim_keeps_the_level_of_both_mels(record: dict) -> None:
    import pyloudnorm

    sr = record["params"]["sample_rate"]
    audio = _speech(sr)
    from flowkit import registry

    registry.load_plugins()
    encoder = registry.build("encoder", record["name"], **record["params"])
    out, out_sr = GriffinLim()(encoder.encode(audio), record)
    assert out_sr == sr and abs(len(out) - len(audio)) <= record["params"]["hop_length"]
    meter = pyloudnorm.Meter(sr)
    before, after = (meter.integrated_loudness(audio.astype(np.float64)),
                     meter.integrated_loudness(out.astype(np.float64)))
    assert abs(after - before) < 1.5, (before, after)


def test_fit_level_keeps_normalises_and_never_clips() -> None:
    sr = 16000
    audio = _speech(sr)
    kept, level = fit_level(audio, sr)
    assert np.array_equal(kept, audio.astype(np.float32)) and level.gain_db == 0.0 and not level.limited
    assert level.describe().startswith("level as decoded (") and "LUFS" in level.describe()
    loud, level = fit_level(audio * 3.0, sr)  # a vocoder that overshoots full scale
    assert level.limited and abs(level.peak_dbfs - PEAK_CEILING_DBFS) < 1e-3
    assert float(np.abs(loud).max()) < 1.0
    assert "lowered" in level.describe()
    target, level = fit_level(audio * 0.05, sr, target_lufs=-23.0)
    assert abs(level.loudness_lufs - (-23.0)) < 0.1 and level.describe().startswith("normalised to -23 LUFS")
    pcm, _ = sf.read(io.BytesIO(wav_bytes(loud, sr)), dtype="int16")
    assert int(np.abs(pcm.astype(np.int32)).max()) < 32767  # no sample at full scale


def test_choose_vocoder(release: Path, tmp_path: Path) -> None:
    assert choose_vocoder() == GriffinLim()
    assert choose_vocoder(path=release) == Vocos(path=str(release))
    assert choose_vocoder("griffin_lim") == GriffinLim()
    with pytest.raises(ConfigError, match=r"vocoder\.griffin_lim takes no path; drop --vocoder-path"):
        choose_vocoder("griffin_lim", release)
    with pytest.raises(RegistryError, match=r"no vocoder named 'vocoss' \(did you mean 'vocos'"):
        choose_vocoder("vocoss")
    record = vocoder_record(Vocos(path=str(release)))
    assert record == {"name": "vocos", "params": {"path": str(release.resolve()), "device": "cpu"}}
    assert choose_vocoder(run_vocoder=record) == Vocos(path=str(release.resolve()))
    assert vocoder_record(None) is None
