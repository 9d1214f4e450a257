"""`EvalSettings`: how ``flowkit eval`` synthesises and judges (its options)."""

from __future__ import annotations

import attrs

from flowkit.errors import ConfigError

__all__ = ["EvalSettings"]


@attrs.frozen
class EvalSettings:
    """How to synthesise and judge (the ``flowkit eval`` options).

    Attributes:
        seed: noise seed; utterance ``utt`` draws from ``derive_seed(seed, "eval:" + utt)``.
        nfe: ODE steps of the run's solver (F5-TTS evaluates with 32).
        cfg: classifier-free guidance strength (F5-TTS: 2.0; 0 = off).
        batch: utterances per sampling call (see `flowkit.evaluation.synthesis`); >= 1.
        limit: evaluate only the first ``limit`` accepted lines (None: all).
        weights: "ema" or "raw".
        language: language of the list's lines ("" : the model's only language, else "en").
        ceilings: also judge the target recordings, raw and through the vocoder.
        samples: utterances with players in eval.html (the first ones of the list).
    """

    seed: int = 0
    nfe: int = 32
    cfg: float = 2.0
    batch: int = 1
    limit: int | None = None
    weights: str = "ema"
    language: str = ""
    ceilings: bool = True
    samples: int = 20

    def __attrs_post_init__(self) -> None:
        for name, low in (("nfe", 1), ("batch", 1)):
            if getattr(self, name) < low:
                raise ConfigError(f"--{name} {getattr(self, name)} must be >= {low}")
        if self.cfg < 0:
            raise ConfigError(f"--cfg {self.cfg} must be >= 0 (F5-TTS uses 2.0; 0 = no guidance)")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit {self.limit} must be >= 1")
