"""What a training step counts: the counters every checkpoint carries, the stats one step
produced, and the unit totals that weight its micro-batches (`flowkit.train.loop`)."""

from __future__ import annotations

from typing import Any

import attrs
import torch

__all__ = ["Counters", "StepStats", "StepTotals"]


@attrs.define
class Counters:
    """Scalars that travel in every checkpoint.

    ``horizon`` is the number of optimizer updates the lr schedule spans, fixed when the
    run starts: a resume with more steps continues on the schedule's floor.
    """

    step: int = 0  # steps taken (micro-batch groups consumed)
    updates: int = 0  # optimizer updates applied (steps minus skipped ones)
    horizon: int = 0
    skipped: int = 0
    consecutive_skips: int = 0
    best_val_loss: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class StepStats:
    """What one step produced; tensors stay on the device until a log step reads them."""

    step: int
    loss: torch.Tensor
    terms: dict[str, torch.Tensor]
    grad_norm: torch.Tensor
    lr: float
    items: int
    real_frames: int
    target_frames: int
    step_s: float
    data_s: float
    skipped: bool = False
    flops: float = 0.0  # model FLOPs of the step (flowkit.model.flops), all micro-batches


@attrs.frozen
class StepTotals:
    """What a step's micro-batches hold, summed over the ranks: ``units`` weights the loss
    terms (``{"frames": ..., "chars": ...}``, divided by the world size, see
    `TrainingLoop.step_totals`); the rest are logged sizes."""

    units: dict[str, float]
    items: int
    real_frames: int
    target_frames: int
