"""Learning-rate schedules: a multiplier of the base learning rate per optimizer update.

Schedules count optimizer updates (not micro-batches, not samples), so the curve is the
same for any ``grad_accum_steps`` and any world size. ``total_updates`` is the run's
horizon, fixed when the run starts (``Trainer.steps``); a resumed run passes the same one.
"""

from __future__ import annotations

import math

import attrs

from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["Constant", "WarmupCosine"]


def _warmup(update: int, warmup_updates: int) -> float:
    # (u + 1) / w: the first update already moves the weights, update w - 1 reaches 1.
    return (update + 1) / warmup_updates


@register("lr_schedule", "warmup_cosine")
@attrs.frozen
class WarmupCosine:
    """Linear warmup, cosine decay to ``floor_ratio``, then the floor.

    Multiplier at 0-based update ``u`` with ``w = warmup_updates`` and horizon ``T``:
    ``(u + 1) / w`` for ``u < w``; ``floor + (1 - floor) * (1 + cos(pi * (u - w) / (T - w))) / 2``
    for ``w <= u < T``; ``floor`` for ``u >= T``. Defaults from the vox design notes
    (warmup 2000 updates, floor 1 % of the peak); the cosine shape is SGDR's
    (Loshchilov & Hutter 2017) without restarts.

    Raises:
        ConfigError: ``warmup_updates < 0`` or ``floor_ratio`` outside [0, 1].
    """

    warmup_updates: int = 2000
    floor_ratio: float = 0.01  # final multiplier; 0 decays to zero

    def __attrs_post_init__(self) -> None:
        if self.warmup_updates < 0:
            raise ConfigError(
                f"lr_schedule.warmup_cosine.warmup_updates={self.warmup_updates} must be >= 0"
            )
        if not 0.0 <= self.floor_ratio <= 1.0:
            raise ConfigError(
                f"lr_schedule.warmup_cosine.floor_ratio={self.floor_ratio} must be in [0, 1]"
            )

    def __call__(self, update: int, total_updates: int) -> float:
        if update >= total_updates:
            return self.floor_ratio
        if update < self.warmup_updates:
            return _warmup(update, self.warmup_updates)
        progress = (update - self.warmup_updates) / (total_updates - self.warmup_updates)
        return self.floor_ratio + (1.0 - self.floor_ratio) * 0.5 * (
            1.0 + math.cos(math.pi * progress)
        )


@register("lr_schedule", "constant")
@attrs.frozen
class Constant:
    """The base learning rate throughout, after an optional linear warmup of
    ``warmup_updates`` updates (``(u + 1) / w``, as `WarmupCosine`)."""

    warmup_updates: int = 0

    def __attrs_post_init__(self) -> None:
        if self.warmup_updates < 0:
            raise ConfigError(
                f"lr_schedule.constant.warmup_updates={self.warmup_updates} must be >= 0"
            )

    def __call__(self, update: int, total_updates: int) -> float:
        if update < self.warmup_updates:
            return _warmup(update, self.warmup_updates)
        return 1.0
