"""Encoders: audio -> latent frames ``[n d]`` at a fixed frame rate.

``encoder.log_mel`` is the weight-free default: a log-compressed mel spectrogram
(librosa STFT and Slaney mel filterbank). Codec or VAE encoders are plugins registered
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


@register("encoder", "log_mel")
@attrs.frozen
class LogMel:
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

    @property
    def frame_rate(self) -> float:
        """Latent frames per second (Hz)."""
        return self.sample_rate / self.hop_length

    @property
    def latent_dim(self) -> int:
        """Channels ``d`` of a latent frame (the mel bands)."""
        return self.n_mels

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
