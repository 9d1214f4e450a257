"""The aligner experiment (gin): ``aligner.learned`` (the network) and ``AlignRun`` (its training).

``gin/align.gin`` is the reference experiment; ``flowkit align train CONFIG --data STORE
--out RUN`` runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import gin

from flowkit import registry
from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["AlignRun", "LearnedAligner"]


@register("aligner", "learned")
@attrs.frozen
class LearnedAligner:
    """The learned aligner's network (`flowkit.align.model.AlignerNet`): sizes and prior.

    Trained on a store with ``flowkit align train``; its timings are written into the store
    with ``flowkit align write`` (it does not run inside ``flowkit prepare``: it reads latents).
    """

    channels: int = 128  # channels of both encoders
    attn_dim: int = 80  # the space keys and queries meet in
    text_layers: int = 3
    frame_layers: int = 2  # pointwise layers after the frame convolution
    kernel: int = 3
    prior_scale: float = 1.0  # the beta-binomial prior's omega (RAD-TTS); training only
    blank_log_p: float = -1.0  # CTC blank score of the forward-sum loss (RAD-TTS)

    def build(self, n_tokens: int, latent_dim: int) -> Any:
        from flowkit.align.model import AlignerNet

        return AlignerNet(n_tokens, latent_dim, self.channels, self.attn_dim, self.text_layers, self.frame_layers,
                          self.kernel)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def align(self, *args: Any, **kwargs: Any) -> Any:
        raise ConfigError("aligner.learned is trained on a store, not run inside prepare: prepare the store, then "
                          "`flowkit align train gin/align.gin --data STORE --out RUN` and "
                          "`flowkit align write STORE --run RUN` (docs/alignment.md)")


def _stores(value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        return (str(value),)
    return tuple(str(v) for v in value)


def _at_least(least: float) -> Any:
    def check(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is not None and value < least:
            raise ConfigError(f"AlignRun.{attribute.name} = {value!r} must be >= {least}; "
                              "fix it in the gin file or -b binding")
    return check


@gin.configurable("AlignRun")
@attrs.frozen
class AlignRun:
    """Everything that defines an aligner run (gin: ``AlignRun.<field>``).

    Batches are drawn afresh at each step from (seed, step), so a resumed run trains on
    exactly the batches an uninterrupted one would; the learning rate warms up linearly
    and then stays constant, so raising ``steps`` on resume continues the same run.

    Raises:
        ConfigError: a value out of range, naming ``AlignRun.<field>`` and the fix.
    """

    aligner: LearnedAligner = attrs.Factory(lambda: registry.build("aligner", "learned"))
    # the units the aligner reads: text.phonemes for languages espeak-ng knows, else text.chars
    text: Any = attrs.Factory(lambda: registry.build("text", "chars"))
    data: Sequence[str] = attrs.field(default=(), converter=_stores)  # stores; every split is aligned
    steps: int = attrs.field(default=400, validator=_at_least(1))
    seed: int = 0
    lr: float = attrs.field(default=2e-3, validator=_at_least(0.0))
    warmup_steps: int = attrs.field(default=100, validator=_at_least(0))
    grad_clip: float = 1.0
    batch_frames: int = attrs.field(default=8000, validator=_at_least(1))  # padded frames per batch
    max_items: int = attrs.field(default=32, validator=_at_least(1))
    # the binarisation loss (RAD-TTS) joins after this many steps, with this weight
    bin_start: int = attrs.field(default=200, validator=_at_least(0))
    bin_weight: float = attrs.field(default=1.0, validator=_at_least(0.0))
    save_every: int = attrs.field(default=100, validator=_at_least(1))
    keep_last: int = attrs.field(default=2, validator=_at_least(1))
    log_every: int = attrs.field(default=25, validator=_at_least(1))
