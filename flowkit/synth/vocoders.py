"""Vocoders: latent frames -> audio.

``vocoder.griffin_lim`` is the weight-free default for ``encoder.log_mel`` and
``encoder.vocos_mel`` latents: the mel spectrogram is mapped back to a linear magnitude
spectrogram through the pseudo-inverse of the encoder's librosa mel filterbank (Slaney for
log_mel, HTK without area normalisation for vocos_mel), and phase is recovered by fast Griffin-Lim (Griffin & Lim 1984; Perraudin et al.
2013 for the momentum variant), both as implemented by librosa. It is intelligible, not
natural: neural vocoders are plugins of kind ``vocoder`` with the same call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError
from flowkit.registry import register

#: librosa filterbank options of each encoder this vocoder inverts.
_MEL_SCALES: dict[str, dict[str, Any]] = {
    "log_mel": {},  # librosa's default: Slaney scale, area-normalised
    "vocos_mel": {"htk": True, "norm": None},
}


@register("vocoder", "griffin_lim")
@attrs.frozen
class GriffinLim:
    """Griffin-Lim phase recovery for ``log_mel`` / ``vocos_mel`` latents (no weights).

    Args:
        n_iter: Griffin-Lim iterations; 32 is librosa's default, more is slower and cleaner.
        momentum: fast Griffin-Lim momentum in [0, 1); 0.99 is librosa's default.
        seed: seed of the initial random phase, so the same latents give the same audio.
    """

    n_iter: int = 32
    momentum: float = 0.99
    seed: int = 0

    def __call__(self, latents: np.ndarray, encoder: Mapping[str, Any]) -> tuple[np.ndarray, int]:
        """Latents ``[n d]`` (de-normalised, natural-log mel) -> ``(audio [samples] float32, Hz)``.

        Args:
            latents: ``[n d]`` log-mel frames as the store holds them.
            encoder: the store's encoder record, ``{"name": "log_mel", "params": {...}}``.

        Raises:
            ConfigError: the latents were not made by ``encoder.log_mel`` or
                ``encoder.vocos_mel``, or their width is
                not the encoder's ``n_mels``.
        """
        import librosa

        name = encoder.get("name")
        p = dict(encoder.get("params", {}))
        if name not in _MEL_SCALES:
            raise ConfigError(
                f"vocoder.griffin_lim inverts encoder.log_mel and encoder.vocos_mel latents, not encoder.{name}; "
                "bind a vocoder made for that encoder (Trainer/report vocoder setting)"
            )
        latents = np.asarray(latents, dtype=np.float32)
        if latents.ndim != 2 or latents.shape[1] != int(p["n_mels"]):
            raise ConfigError(
                f"vocoder.griffin_lim: latents of shape {tuple(latents.shape)} do not match "
                f"n_mels={p['n_mels']} of the encoder"
            )
        sr = int(p["sample_rate"])
        fmax = p.get("fmax") or sr / 2
        mel = np.exp(latents.T.astype(np.float64))  # [d n] magnitude mel
        basis = librosa.filters.mel(
            sr=sr, n_fft=int(p["n_fft"]), n_mels=int(p["n_mels"]), fmin=float(p.get("fmin", 0.0)), fmax=float(fmax),
            **_MEL_SCALES[name],
        )
        # pseudo-inverse, clipped at zero: librosa's NNLS inverse is ~50x slower for the
        # same Griffin-Lim result at these sizes
        stft_mag = np.maximum(np.linalg.pinv(basis) @ mel, 0.0)
        audio = librosa.griffinlim(
            stft_mag,
            n_iter=self.n_iter,
            hop_length=int(p["hop_length"]),
            win_length=int(p["win_length"]),
            n_fft=int(p["n_fft"]),
            momentum=self.momentum,
            random_state=self.seed,
        )
        peak = float(np.max(np.abs(audio))) if audio.size else 0.0
        if peak > 1.0:  # keep it playable; griffin-lim does not preserve absolute level
            audio = audio / peak
        return audio.astype(np.float32), sr
