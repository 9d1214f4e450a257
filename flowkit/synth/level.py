"""The level of decoded audio: as the vocoder made it, or a stated loudness; never clipped.

Shape legend: s audio samples.

A vocoder's output keeps the level its latents imply: Vocos reconstructs the level of the
mel it is given, and Griffin-Lim through the pseudo-inverse of the mel filterbank keeps it
approximately. `fit_level` leaves that level alone, or normalises to a stated integrated
loudness (ITU-R BS.1770-4, measured with pyloudnorm), and in both cases lowers the gain
when a sample would pass `PEAK_CEILING_DBFS`: nothing is scaled up to full scale and
nothing is clipped when written as 16-bit PCM.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

__all__ = ["PEAK_CEILING_DBFS", "Level", "fit_level"]

#: Highest sample peak written (dBFS): 1 dB of headroom, as EBU R128 delivery allows.
PEAK_CEILING_DBFS = -1.0
_MIN_LOUDNESS_SECONDS = 0.4  # one BS.1770 gating block; shorter clips have no integrated loudness


def _db(x: float) -> float:
    return 20.0 * math.log10(x) if x > 0 else -math.inf


def _loudness(audio: np.ndarray, sample_rate: int) -> float | None:
    if audio.size < _MIN_LOUDNESS_SECONDS * sample_rate or not np.any(audio):
        return None
    import pyloudnorm

    value = float(pyloudnorm.Meter(sample_rate).integrated_loudness(audio.astype(np.float64)))
    return value if math.isfinite(value) else None


@attrs.frozen
class Level:
    """What `fit_level` did: ``gain_db`` applied, the result's loudness (LUFS, None when the
    clip is under 0.4 s or silent) and sample peak (dBFS), and the loudness asked for."""

    gain_db: float
    loudness_lufs: float | None
    peak_dbfs: float
    target_lufs: float | None
    limited: bool

    def describe(self) -> str:
        """One phrase for sample cards and the synthesize line, e.g. ``level as decoded
        (-24.1 LUFS, peak -7.9 dBFS)``."""
        loud = f"{self.loudness_lufs:.1f} LUFS, " if self.loudness_lufs is not None else ""
        measured = f"{loud}peak {self.peak_dbfs:.1f} dBFS"
        if self.target_lufs is not None:
            if self.limited:  # the gain stopped at the ceiling: the target was not reached
                reached = f"{self.loudness_lufs:.1f} LUFS" if self.loudness_lufs is not None else "a lower level"
                return (f"held at the {PEAK_CEILING_DBFS:g} dBFS peak ceiling: {reached}, not the "
                        f"{self.target_lufs:g} LUFS asked (gain {self.gain_db:+.1f} dB; "
                        f"peak {self.peak_dbfs:.1f} dBFS)")
            if self.loudness_lufs is None:  # nothing to measure: no gain was applied
                return (f"level as decoded: {self.target_lufs:g} LUFS not applied (under "
                        f"{_MIN_LOUDNESS_SECONDS:g} s or silent: no integrated loudness; {measured})")
            return f"normalised to {self.target_lufs:g} LUFS (gain {self.gain_db:+.1f} dB; {measured})"
        if self.limited:
            return (f"level as decoded, lowered {-self.gain_db:.1f} dB to the {PEAK_CEILING_DBFS:g} dBFS "
                    f"peak ceiling ({measured})")
        return f"level as decoded ({measured})"


def fit_level(audio: np.ndarray, sample_rate: int, target_lufs: float | None = None) -> tuple[np.ndarray, Level]:
    """``audio [s]`` at its own level (``target_lufs`` None) or at ``target_lufs``; peaks at
    most `PEAK_CEILING_DBFS`. Non-finite samples become 0.

    Returns:
        ``(audio [s] float32, Level)``.
    """
    audio = np.nan_to_num(np.asarray(audio, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    gain_db = 0.0
    if target_lufs is not None:
        measured = _loudness(audio, sample_rate)
        if measured is not None:
            gain_db = float(target_lufs) - measured
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    limited = peak > 0 and _db(peak) + gain_db > PEAK_CEILING_DBFS
    if limited:
        gain_db = PEAK_CEILING_DBFS - _db(peak)
    out = (audio * 10.0 ** (gain_db / 20.0)).astype(np.float32)
    out_peak = float(np.max(np.abs(out))) if out.size else 0.0
    return out, Level(gain_db=gain_db, loudness_lufs=_loudness(out, sample_rate), peak_dbfs=_db(out_peak),
                      target_lufs=None if target_lufs is None else float(target_lufs), limited=bool(limited))
