"""``criterion.dnsmos``: how clean is the recording? DNSMOS P.835 (``quality.dnsmos``).

Noise, music, reverberation and codec damage lower DNSMOS's background (BAK) and overall
(OVRL) scores; a studio prompt scores high on both. The measure is the three scores of the
clip (`flowkit.judges.quality.DNSMOS`), with one difference from the reference procedure:
a clip shorter than the model's 9.01 s window is repeated to exactly one window (the
reference doubles it until it is longer and averages up to three windows that hold the
same sentence again), which is a third to a half of the time on prompts of 1-5 s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.curation.criteria.base import Decision, Threshold, by_group, robust_bounds
from flowkit.registry import register

__all__ = ["DNSMOSCriterion"]

SCORES = ("ovrl", "sig", "bak")


@register("criterion", "dnsmos")
@attrs.define
class DNSMOSCriterion:
    """Drops noisy clips: DNSMOS ``score`` (``"bak"``, ``"ovrl"`` or ``"sig"``) far below the group's.

    Per speaker and language, low side: a score more than ``k`` robust standard deviations
    below the group's median, and below ``cap``, drops the clip. Default ``"bak"``: additive
    noise moves the background score most (a clean prompt ~4, the same prompt under noise
    at 10 dB SNR ~1.9; tests/judges/test_quality.py); ``cap`` 2.0 (P.835's 2 = "fairly
    conspicuous, somewhat intrusive" background) keeps the quietest-backed clean prompts of
    the shared corpus (lowest BAK 2.14, G.722-decoded) and drops white noise at 0 dB SNR
    (BAK 1.57 at most).

    Args:
        judge: a ``quality`` component; None = ``quality.dnsmos`` on one thread.
        score: which DNSMOS score decides.
        k: robust standard deviations below the group median that flag a clip.
        cap: scores at or above this are never flagged.
    """

    judge: Any = None
    score: str = "bak"
    k: float = 4.0
    cap: float = 2.0
    _quality: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.score not in SCORES:
            from flowkit.errors import ConfigError

            raise ConfigError(f"criterion.dnsmos.score = {self.score!r}; give one of {', '.join(SCORES)}")

    def quality(self) -> Any:
        """The quality judge in use (built once)."""
        if self._quality is None:
            if self.judge is not None:
                self._quality = self.judge
            else:
                from flowkit import registry

                registry.load_plugins()
                self._quality = registry.build("quality", "dnsmos", threads=1)
        return self._quality

    def measure(self, clip: Any) -> dict[str, Any]:
        from flowkit.judges.quality import DNSMOS_RATE, WINDOW_S

        x = np.asarray(clip.audio, dtype=np.float32)
        window = int(WINDOW_S * clip.sample_rate)
        if clip.sample_rate == DNSMOS_RATE and 0 < x.size < window:
            x = np.tile(x, -(-window // x.size))[:window]
        scores = self.quality().score(x, clip.sample_rate)
        return {f"dnsmos_{k}": float(scores[k]) for k in SCORES}

    def decide(self, clips: Sequence[Any], measures: Sequence[Mapping[str, Any]]) -> Decision:
        key = f"dnsmos_{self.score}"
        values = [float(m[key]) if m.get(key) is not None else float("nan") for m in measures]

        def bounds(v: Sequence[float]) -> tuple[float, float, float | None, float | None]:
            return robust_bounds(v, k=self.k, side="low", min_scale=0.1, cap=self.cap)

        def describe(value: float, t: Threshold) -> str:
            return f"dnsmos: {self.score.upper()} {value:.2f} < {t.low:.2f} (group {t.group}: median {t.median:.2f})"

        reasons, thresholds = by_group([c.group for c in clips], values, bounds, describe)
        return Decision("dnsmos", f"DNSMOS P.835 {self.score.upper()} (MOS, 1-5)", values, reasons, thresholds)

    def describe(self) -> dict[str, Any]:
        return {"name": "criterion.dnsmos", "score": self.score, "k": self.k, "cap": self.cap,
                "judge": self.quality().describe()}
