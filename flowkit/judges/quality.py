"""Speech quality judges (kind ``quality``): how does it sound, with no reference to compare to?

- ``quality.dnsmos``: DNSMOS P.835 (Reddy et al. 2022, "DNSMOS P.835: a non-intrusive
  perceptual objective speech quality metric to evaluate noise suppressors"): predicted
  mean opinion scores of the speech signal (SIG), the background (BAK) and the whole
  (OVRL), 1-5. The ``speechmos`` wheel (MIT, Microsoft's ONNX models) ships the model; it
  runs on onnxruntime: nothing is downloaded. Install with ``pip install flowkit[eval]``.

The procedure is the P.835 reference one (microsoft/DNS-Challenge, ``dnsmos_local.py``, as
speechmos runs it): 16 kHz audio, a clip shorter than 9.01 s doubled until it is that
long, 9.01 s windows every second, each window's raw scores mapped through the published
calibration polynomials, the windows averaged. flowkit runs the P.835 model itself rather
than through ``speechmos.dnsmos.run``, which also runs the P.808 model on every window
(about 60 % of its time, measured) and lets onnxruntime spin one thread per core: here one
session with ``threads`` threads and no spinning (throughput: docs/performance.md).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from flowkit.entry_points import installed_version
from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["DNSMOS", "DNSMOS_MODULES"]

#: the modules ``quality.dnsmos`` imports
DNSMOS_MODULES = ("speechmos", "onnxruntime")
DNSMOS_RATE = 16000  # Hz: the ONNX model takes 16 kHz audio
WINDOW_S = 9.01  # seconds of audio per model input (the model's input is [N, 144160])
#: P.835 calibration polynomials (highest power first) from raw model outputs to MOS, as
#: published with DNSMOS P.835 (DNS-Challenge dnsmos_local.py): standard and personalised
CALIBRATION = {
    False: {"sig": (-0.08397278, 1.22083953, 0.0052439), "bak": (-0.13166888, 1.60915514, -0.39604546),
            "ovrl": (-0.06766283, 1.11546468, 0.04602535)},
    True: {"sig": (-0.01019296, 0.02751166, 1.19576786, -0.24348726),
           "bak": (-0.04976499, 0.44276479, -0.1644611, 0.96883132),
           "ovrl": (-0.00533021, 0.005101, 1.18058466, -0.11236046)},
}


@register("quality", "dnsmos")
@attrs.define
class DNSMOS:
    """DNSMOS P.835 from the ONNX model the ``speechmos`` wheel ships.

    Args:
        personalized: score with the personalised model (pDNSMOS, which also penalises
            interfering talkers) instead of the standard one.
        threads: onnxruntime threads for one window; 0 = the cores this process may use,
            at most 4 (``flowkit eval``'s choice: one thread left half of 2 cores idle for
            the third of an eval DNSMOS takes); 1, the default, for the probe, which runs
            between training steps. Scores differ between thread counts by float32
            rounding (under 1e-7 MOS measured).

    Raises:
        ConfigError: ``threads`` below 0 (at the first score).
    """

    personalized: bool = False
    threads: int = 1
    _session: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def _model_path(self) -> Any:
        from pathlib import Path

        import speechmos

        folder = "pdnsmos_models" if self.personalized else "dnsmos_models"
        return Path(speechmos.__file__).parent / folder / "sig_bak_ovr.onnx"

    def _get_session(self) -> Any:
        if self._session is None:
            try:
                import onnxruntime as ort
                path = self._model_path()
            except ImportError as exc:
                raise ConfigError(f"quality.dnsmos needs the speechmos package and onnxruntime ({exc}); "
                                  "pip install 'flowkit[eval]'") from None
            if not path.is_file():
                raise ConfigError(f"quality.dnsmos: the speechmos wheel lacks {path}; reinstall it "
                                  "(pip install --force-reinstall speechmos)")
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.resolved_threads()
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return self._session

    def resolved_threads(self) -> int:
        """The onnxruntime threads ``threads`` stands for (0: this process's cores, at most 4)."""
        from flowkit.processes import usable_cores

        if int(self.threads) < 0:
            raise ConfigError(f"quality.dnsmos threads = {self.threads}; give 0 (the cores, at most 4) or more")
        if int(self.threads) == 0:
            return min(4, usable_cores())
        return int(self.threads)

    def score(self, audio: np.ndarray, sample_rate: int) -> dict[str, float]:
        """``{"ovrl", "sig", "bak"}`` (1-5) of ``audio [samples]`` float at ``sample_rate`` Hz.

        Raises:
            ConfigError: speechmos or onnxruntime missing, or the audio is empty or not 1-D/2-D.
        """
        import soxr

        session = self._get_session()
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
        window = int(WINDOW_S * DNSMOS_RATE)
        while x.size < window:  # the reference doubles a short clip (not tiled to the length)
            x = np.concatenate([x, x])
        hops = int(np.floor(x.size / DNSMOS_RATE) - WINDOW_S) + 1
        name = session.get_inputs()[0].name
        raw = [session.run(None, {name: x[k * DNSMOS_RATE: k * DNSMOS_RATE + window][None]})[0][0]
               for k in range(hops) if k * DNSMOS_RATE + window <= x.size]
        calibration = CALIBRATION[bool(self.personalized)]
        out = {}
        for j, key in enumerate(("sig", "bak", "ovrl")):
            poly = np.poly1d(calibration[key])
            out[key] = float(np.mean([poly(float(r[j])) for r in raw]))
        return {"ovrl": out["ovrl"], "sig": out["sig"], "bak": out["bak"]}

    def describe(self) -> dict[str, Any]:
        """``{"name": "quality.dnsmos", "model", "version"}``."""
        folder = "pdnsmos_models" if self.personalized else "dnsmos_models"
        return {"name": "quality.dnsmos", "model": f"DNSMOS P.835 {folder}/sig_bak_ovr.onnx",
                "version": f"speechmos {installed_version('speechmos')}"}
