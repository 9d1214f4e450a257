"""Encoders: audio -> latent frames ``[n d]`` at a fixed frame rate.

``encoder.log_mel`` is the default: a log-compressed mel spectrogram (librosa STFT and
Slaney mel filterbank, 16 kHz, 80 bins). ``encoder.vocos_mel`` is the feature of Vocos and
F5-TTS (24 kHz, 100 HTK bins), for models that exchange weights with them. Codec or VAE encoders are plugins registered
under kind ``encoder`` with the same interface (`flowkit.protocols.Encoder`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import attrs
import numpy as np

from flowkit.registry import register


@lru_cache(maxsize=8)
def _mel_basis(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    import librosa

    return librosa.filters.mel(sr=sample_rate, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax).astype(np.float32)


class _MelFrames:
    """What both mel encoders derive from their fields: frame rate and latent width."""

    sample_rate: int
    hop_length: int
    n_mels: int

    @property
    def frame_rate(self) -> float:
        """Latent frames per second (Hz)."""
        return self.sample_rate / self.hop_length

    @property
    def latent_dim(self) -> int:
        """Channels ``d`` of a latent frame (the mel bands)."""
        return self.n_mels


@register("encoder", "log_mel")
@attrs.frozen
class LogMel(_MelFrames):
    """Natural-log mel spectrogram: ``log(max(mel, floor))`` of the magnitude STFT.

    Frame rate = ``sample_rate / hop_length`` Hz (100 Hz with the defaults); frames are
    centred (frame k covers samples around ``k * hop_length``), so a clip of ``s``
    samples gives ``1 + s // hop_length`` frames.
    """

    sample_rate: int = 16000  # Hz; prepare resamples every clip to this rate
    n_fft: int = 1024
    win_length: int = 640  # 40 ms at 16 kHz
    hop_length: int = 160  # 10 ms at 16 kHz -> 100 Hz frames
    n_mels: int = 80
    fmin: float = 0.0
    fmax: float | None = None  # None: sample_rate / 2
    log_floor: float = 1e-5  # -11.5 after log: silence, kept finite for fp16

    def encode(self, audio: np.ndarray) -> np.ndarray:
        """``audio [samples]`` float32 mono at `sample_rate` -> log-mel ``[n n_mels]`` float32."""
        import librosa

        spec = np.abs(
            librosa.stft(
                audio.astype(np.float32, copy=False),
                n_fft=self.n_fft,
                hop_length=self.hop_length,
                win_length=self.win_length,
                center=True,
                pad_mode="constant",
            )
        )
        fmax = self.fmax if self.fmax is not None else self.sample_rate / 2
        mel = _mel_basis(self.sample_rate, self.n_fft, self.n_mels, float(self.fmin), float(fmax)) @ spec
        return np.log(np.maximum(mel, self.log_floor)).T.astype(np.float32)

    def params(self) -> dict[str, Any]:
        """Every parameter, recorded in the store's attributes."""
        return attrs.asdict(self)


@lru_cache(maxsize=8)
def _htk_mel_basis(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    import librosa

    return librosa.filters.mel(
        sr=sample_rate, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=True, norm=None
    ).astype(np.float32)


@register("encoder", "vocos_mel")
@attrs.frozen
class VocosMel(_MelFrames):
    """The log-mel features of Vocos and F5-TTS v1 (F5-TTS ``MelSpec(mel_spec_type="vocos")``).

    Magnitude (power 1) STFT with a periodic Hann window, centred with reflect padding;
    HTK mel scale without area normalisation; ``log(max(mel, 1e-5))``. At the defaults:
    24 kHz, 1024-point FFT and window, hop 256 (93.75 Hz frames), 100 mel bins. A clip of
    ``s`` samples gives ``1 + s // hop_length`` frames.

    Why own code: F5-TTS computes these with torchaudio's ``MelSpectrogram``, and
    torchaudio does not load beside the torch flowkit pins. The same arithmetic is
    written here with ``torch.stft`` (the STFT torchaudio calls) and librosa's HTK
    filterbank; ``tests/data/test_vocos_mel.py`` holds it to <= 1e-4 max abs against
    F5-TTS's own MelSpec on real clips (fixture from ``tools/f5_fixtures.py``).
    """

    sample_rate: int = 24000  # Hz; prepare resamples every clip to this rate
    n_fft: int = 1024
    win_length: int = 1024
    hop_length: int = 256  # 93.75 Hz frames at 24 kHz
    n_mels: int = 100
    fmin: float = 0.0
    fmax: float | None = None  # None: sample_rate / 2
    log_floor: float = 1e-5  # F5-TTS / Vocos clamp before the log

    def encode(self, audio: np.ndarray) -> np.ndarray:
        """``audio [samples]`` float32 mono at `sample_rate` -> log-mel ``[n n_mels]`` float32.

        Raises:
            ValueError: the clip is not longer than ``n_fft // 2`` samples (reflect padding
                needs more).
        """
        import torch

        wave = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))
        if wave.ndim != 1 or wave.shape[0] <= self.n_fft // 2:
            raise ValueError(
                f"vocos_mel needs a mono clip longer than {self.n_fft // 2} samples, got shape {tuple(wave.shape)}"
            )
        window = torch.hann_window(self.win_length, periodic=True, dtype=torch.float32)
        spec = torch.stft(
            wave, n_fft=self.n_fft, hop_length=self.hop_length, win_length=self.win_length, window=window,
            center=True, pad_mode="reflect", normalized=False, onesided=True, return_complex=True,
        ).abs()  # [n_fft // 2 + 1, n]
        fmax = self.fmax if self.fmax is not None else self.sample_rate / 2
        basis = torch.from_numpy(_htk_mel_basis(self.sample_rate, self.n_fft, self.n_mels, float(self.fmin),
                                                float(fmax)))
        mel = spec.T @ basis.T  # [n, n_mels]
        return mel.clamp(min=self.log_floor).log().numpy().astype(np.float32, copy=False)

    def params(self) -> dict[str, Any]:
        """Every parameter, recorded in the store's attributes."""
        return attrs.asdict(self)
