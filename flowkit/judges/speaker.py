"""Speaker similarity judges (kind ``speaker``): is it the prompt's voice?

- ``speaker.resemblyzer``: Resemblyzer's GE2E speaker encoder (Wan et al. 2018, "Generalized
  End-to-End Loss for Speaker Verification"; a 3-layer LSTM over 40-band mel frames, 256-d
  embeddings). The ``resemblyzer`` wheel (Resemble AI, Apache-2.0) ships its weights,
  ``pretrained.pt`` (17 MB): nothing is downloaded. Install with ``pip install flowkit[eval]``.

Seed-TTS-eval and F5-TTS report SIM with a WavLM-large verification model; resemblyzer is
the CPU-sized, offline stand-in, so its figures compare runs of flowkit, not papers. On the
bundled demo clips: same speaker 0.79-0.94, another speaker 0.55-0.71.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from flowkit.entry_points import installed_version
from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["RESEMBLYZER_MODULES", "Resemblyzer", "cosine"]

#: the modules ``speaker.resemblyzer`` imports (webrtcvad trims silences; it imports
#: ``pkg_resources``, which setuptools 81 removed: the extra pins ``setuptools<81``)
RESEMBLYZER_MODULES = ("resemblyzer", "webrtcvad", "pkg_resources")
TARGET_DBFS = -30.0  # Resemblyzer's audio_norm_target_dBFS


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of ``a [d]`` and ``b [d]``; 0.0 when either is all zeros."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


@register("speaker", "resemblyzer")
@attrs.define
class Resemblyzer:
    """GE2E speaker embeddings from the weights the ``resemblyzer`` wheel ships.

    A clip is brought to -30 dBFS RMS (louder ones too, unlike Resemblyzer's own
    ``preprocess_wav``, so the level does not move the embedding), resampled to 16 kHz and
    stripped of long silences (webrtcvad, as ``preprocess_wav`` does); its embedding is the
    L2-normalised mean of 1.6 s partial embeddings. A clip with no voiced audio left embeds
    to zeros, and its similarity to anything is 0.

    Args:
        device: torch device of the encoder ("cpu"; it is small: ~1.4M parameters).
    """

    device: str = "cpu"
    _encoder: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def _get_encoder(self) -> Any:
        if self._encoder is None:
            import warnings

            try:
                with warnings.catch_warnings():  # webrtcvad imports the deprecated pkg_resources
                    warnings.simplefilter("ignore")
                    from resemblyzer import VoiceEncoder
            except ImportError as exc:
                raise ConfigError(f"speaker.resemblyzer needs the resemblyzer package ({exc}); "
                                  "pip install 'flowkit[eval]'") from None
            self._encoder = VoiceEncoder(device=self.device, verbose=False)
        return self._encoder

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """``audio [samples]`` (or ``[samples, channels]``) float at ``sample_rate`` Hz ->
        L2-normalised embedding ``[256]`` float32 (zeros when no voice is left after trimming).

        Raises:
            ConfigError: resemblyzer is not installed, or the audio is not 1-D/2-D.
        """
        encoder = self._get_encoder()
        from resemblyzer import preprocess_wav

        x = np.asarray(audio, dtype=np.float32)
        if x.ndim == 2:
            x = x.mean(axis=1)
        if x.ndim != 1:
            raise ConfigError(f"speaker.resemblyzer: audio of shape {np.shape(audio)}; give [samples]")
        rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0
        if rms == 0.0:
            return np.zeros(256, dtype=np.float32)
        # One level for every clip: Resemblyzer only raises quiet clips to -30 dBFS, and its
        # mel features are not logarithmic, so a louder copy of a clip would embed elsewhere
        # (0.955 for 4x louder, measured); the clip is brought to -30 dBFS RMS either way.
        x = np.clip(x * (10 ** (TARGET_DBFS / 20) / rms), -1.0, 1.0).astype(np.float32)
        wav = preprocess_wav(x, source_sr=int(sample_rate))
        if wav.size < 480:  # less than one 30 ms VAD window of voice
            return np.zeros(256, dtype=np.float32)
        emb = np.asarray(encoder.embed_utterance(wav), dtype=np.float32)
        if not np.all(np.isfinite(emb)):
            return np.zeros_like(emb)
        return emb

    def similarity(self, a: np.ndarray, sr_a: int, b: np.ndarray, sr_b: int) -> float:
        """Cosine similarity of the embeddings of ``a`` (at ``sr_a`` Hz) and ``b`` (at ``sr_b``)."""
        return cosine(self.embed(a, sr_a), self.embed(b, sr_b))

    def describe(self) -> dict[str, Any]:
        """``{"name": "speaker.resemblyzer", "model", "version"}``."""
        return {"name": "speaker.resemblyzer", "model": "GE2E pretrained.pt (the resemblyzer wheel's)",
                "version": f"resemblyzer {installed_version('resemblyzer')}"}
