"""encoder.vocos_mel against F5-TTS's own ``MelSpec(mel_spec_type="vocos")`` on real clips.

The fixture (``tests/fixtures/f5/vocos_mel.npz``) was written once by ``tools/f5_fixtures.py mel``
with F5-TTS's code and a real torchaudio; it holds 1.2 s excerpts of six clips of the shared
corpus at 24 kHz (one near-silent) and F5's log-mel of each. The comparison is the one
``tests/numerics.py`` states for log-mels on any CPU: linear magnitudes relative to each
frame's peak (bar 5e-5) and log values within 40 dB of the peak (bar 5e-3), never absolute
log values at the floor, where CPUs differ by tens of per cent of a near-zero magnitude.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from numerics import assert_log_mel_close

from flowkit.data.encoders import VocosMel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "f5" / "vocos_mel.npz"


def _cases():
    data = np.load(FIXTURE)
    meta = json.loads(str(data["meta"]))
    return meta, [(clip, data[f"wave_{i}"], data[f"mel_{i}"]) for i, clip in enumerate(meta["clips"])]


@pytest.mark.parametrize("index", range(6))
def test_equals_f5_melspec_on_real_clips(index: int) -> None:
    _, cases = _cases()
    clip, wave, expected = cases[index]
    got = VocosMel().encode(wave)
    assert got.shape == expected.shape == (1 + len(wave) // 256, 100), clip
    measures = assert_log_mel_close(got, expected, label=f"{clip} against F5's MelSpec")
    print(clip, measures)


def test_the_comparison_sees_a_wrong_mel() -> None:
    """The bars catch real mistakes: a 1 % gain error, a one-frame shift, librosa's
    Slaney basis instead of the HTK one all fail them."""
    import librosa

    _, cases = _cases()
    _, wave, expected = cases[0]
    got = VocosMel().encode(wave)
    for wrong in (got + np.log(1.01), np.roll(got, 1, axis=0)):
        with pytest.raises(AssertionError):
            assert_log_mel_close(wrong, expected, label="wrong")
    spec = np.abs(librosa.stft(wave, n_fft=1024, hop_length=256, win_length=1024, center=True, pad_mode="reflect"))
    slaney = librosa.filters.mel(sr=24000, n_fft=1024, n_mels=100, fmin=0, fmax=None, htk=False, norm="slaney")
    wrong_basis = np.log(np.maximum(slaney @ spec, 1e-5)).T[: len(expected)]
    with pytest.raises(AssertionError):
        assert_log_mel_close(wrong_basis, expected, label="slaney")


def test_fixture_holds_speech_and_the_log_floor() -> None:
    """The comparison covers loud frames and frames clamped at log(1e-5)."""
    _, cases = _cases()
    mels = np.concatenate([mel for _, _, mel in cases])
    assert mels.max() > 0.0
    assert np.isclose(mels.min(), np.log(1e-5), atol=1e-6)


def test_flowkit_decode_reproduces_the_fixture_waveform(corpus_dir: Path) -> None:
    """prepare's decode + resample gives the waveform F5's MelSpec was fed (so a store of
    these clips holds F5's features, not only the encoder in isolation)."""
    from flowkit.data.audio import load_audio

    meta, cases = _cases()
    start, length = meta["excerpt"]
    for clip, wave, _ in cases:
        ours = load_audio(corpus_dir / "wavs" / f"{clip}.flac", 24000)[start:start + length]
        assert np.abs(ours - wave).max() <= 1e-6, clip


def test_frame_rate_dim_and_short_clip() -> None:
    enc = VocosMel()
    assert enc.frame_rate == 93.75 and enc.latent_dim == 100
    with pytest.raises(ValueError, match="longer than 512 samples"):
        enc.encode(np.zeros(512, dtype=np.float32))


def test_prepare_records_vocos_mel(tmp_path: Path, quiet_prepare, small_corpus: Path) -> None:
    import attrs

    from flowkit.data.prepare import PrepareSettings
    from flowkit.data.store import StoreReader

    settings = attrs.evolve(PrepareSettings(), encoder=VocosMel())
    quiet_prepare([small_corpus], tmp_path / "s.zarr", settings=settings)
    reader = StoreReader.open(tmp_path / "s.zarr")
    assert reader.attrs["encoder"]["name"] == "vocos_mel"
    assert reader.attrs["frame_rate"] == 93.75 and reader.attrs["sample_rate"] == 24000 and reader.latent_dim == 100


def test_griffin_lim_inverts_vocos_mel() -> None:
    """Griffin-Lim with the HTK basis gives audio whose vocos_mel is near the input's
    (with librosa's Slaney basis the loud bins would be off by the area normalisation)."""
    from flowkit.synth.vocoders import GriffinLim

    _, cases = _cases()
    _, wave, mel = cases[0]
    enc = VocosMel()
    audio, sr = GriffinLim(n_iter=32)(mel, {"name": "vocos_mel", "params": enc.params()})
    assert sr == 24000 and abs(len(audio) - len(wave)) <= 256
    again = enc.encode(audio)[: len(mel)]
    loud = mel > np.percentile(mel, 75)
    assert np.median(np.abs(again - mel)[loud]) < 0.5
