"""Speech quality judges (kind ``quality``): how does it sound, with no reference to compare to?

- ``quality.dnsmos``: DNSMOS P.835 (Reddy et al. 2022, "DNSMOS P.835: a non-intrusive
  perceptual objective speech quality metric to evaluate noise suppressors"): predicted
  mean opinion scores of the speech signal (SIG), the background (BAK) and the whole
  (OVRL), 1-5, from 9.01 s windows of 16 kHz audio (a shorter clip is repeated to fill one),
  plus the P.808 overall score (``p808``). The ``speechmos`` wheel (MIT, Microsoft's ONNX
  models) ships the models; they run on onnxruntime: nothing is downloaded. Install with
  ``pip install flowkit[eval]``.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["DNSMOS_MODULES", "DNSMOS"]

#: the modules ``quality.dnsmos`` imports (speechmos declares no dependencies of its own)
DNSMOS_MODULES = ("speechmos", "onnxruntime", "librosa", "requests")
DNSMOS_RATE = 16000  # Hz: the ONNX models take 16 kHz audio


def _version(distribution: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


@register("quality", "dnsmos")
@attrs.define
class DNSMOS:
    """DNSMOS P.835 from the ONNX models the ``speechmos`` wheel ships.

    Args:
        personalized: score with the personalised model (pDNSMOS, which also penalises
            interfering talkers) instead of the standard one.
    """

    personalized: bool = False
    _model: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def _get_model(self) -> Any:
        if self._model is None:
            from pathlib import Path

            try:
                import speechmos
                from speechmos.dnsmos import DNSMOS as Scorer
            except ImportError as exc:
                raise ConfigError(f"quality.dnsmos needs the speechmos package and onnxruntime ({exc}); "
                                  "pip install 'flowkit[eval]'") from None
            root = Path(speechmos.__file__).parent
            primary = root / ("pdnsmos_models" if self.personalized else "dnsmos_models") / "sig_bak_ovr.onnx"
            p808 = root / "dnsmos_models" / "model_v8.onnx"
            for path in (primary, p808):
                if not path.is_file():
                    raise ConfigError(f"quality.dnsmos: the speechmos wheel lacks {path}; reinstall it "
                                      "(pip install --force-reinstall speechmos)")
            self._model = Scorer(str(primary), str(p808))
        return self._model

    def score(self, audio: np.ndarray, sample_rate: int) -> dict[str, float]:
        """``{"ovrl", "sig", "bak", "p808"}`` (1-5) of ``audio [samples]`` float at ``sample_rate`` Hz.

        Raises:
            ConfigError: speechmos or onnxruntime missing, or the audio is empty or not 1-D/2-D.
        """
        import soxr

        model = self._get_model()
        x = np.asarray(audio, dtype=np.float32)
        if x.ndim == 2:
            x = x.mean(axis=1)
        if x.ndim != 1 or x.size == 0:
            raise ConfigError(f"quality.dnsmos: audio of shape {np.shape(audio)}; give a non-empty [samples]")
        if int(sample_rate) != DNSMOS_RATE:
            x = soxr.resample(x, int(sample_rate), DNSMOS_RATE).astype(np.float32)
        peak = float(np.max(np.abs(x)))
        if peak > 1.0:  # vocoders keep the level the latents imply: scale, never clip
            x = x / peak
        out = model(x, DNSMOS_RATE, self.personalized)
        return {"ovrl": float(out["ovrl_mos"]), "sig": float(out["sig_mos"]), "bak": float(out["bak_mos"]),
                "p808": float(out["p808_mos"])}

    def describe(self) -> dict[str, Any]:
        """``{"name": "quality.dnsmos", "model", "version"}``."""
        model = "DNSMOS P.835 " + ("pdnsmos_models" if self.personalized else "dnsmos_models") + "/sig_bak_ovr.onnx + P.808 model_v8.onnx"
        return {"name": "quality.dnsmos", "model": model, "version": f"speechmos {_version('speechmos')}"}
