"""Loss terms of a training step, each with the unit it is averaged over.

Shape legend: b batch, n frames, d latent channels, nt characters.

A term's ``value`` is its mean over its own units (target frames, or characters) in one
micro-batch and ``count`` how many units that was; the trainer weights each term across
micro-batches by ``count / total count`` so that a step equals one large batch. Everything
is computed in float32. Masked positions (padding, prompt frames, characters outside
units) contribute exactly zero to the value and to the gradient.

`LossInputs`, `LossTerm` and `masked_mean` are public API: what a loss plugin is given,
returns, and averages with (docs/plugins.md, "A loss").
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import attrs
import torch

from flowkit.errors import ConfigError
from flowkit.model.conditions import Conditions
from flowkit.model.durations import char_duration_targets
from flowkit.protocols import Schedule
from flowkit.registry import register

__all__ = [
    "DurationL1",
    "F0Consistency",
    "LossInputs",
    "LossTerm",
    "MaskedMSE",
    "MelL1",
    "masked_mean",
]


@attrs.frozen
class LossInputs:
    """Everything a loss term may need from one micro-batch.

    Attributes:
        output: ``[b n d]`` network output (the schedule's target space).
        target: ``[b n d]`` the schedule's training target.
        x0: ``[b n d]`` noise; x1: ``[b n d]`` data; x_t: ``[b n d]`` the noisy sample.
        t: ``[b]`` flow times.
        cond: the `Conditions` (masks: ``frame_mask``, ``target_mask``, text, unit timings).
        schedule: the schedule that produced ``x_t`` and ``target``.
        log_duration: ``[b nt]`` predicted ``log(1 + frames)`` per character (aligned path) or None.
    """

    output: torch.Tensor
    target: torch.Tensor
    x0: torch.Tensor
    x1: torch.Tensor
    x_t: torch.Tensor
    t: torch.Tensor
    cond: Conditions
    schedule: Schedule
    log_duration: torch.Tensor | None = None

    @functools.cached_property
    def loss_mask(self) -> torch.Tensor:
        """bool ``[b n]``: target frames (never padding)."""
        return self.cond.target_mask & self.cond.frame_mask

    @functools.cached_property
    def x1_estimate(self) -> torch.Tensor:
        """float32 ``[b n d]``: the data the output implies (``schedule.x1_estimate``).

        Cached: ``loss.mel_l1`` and ``loss.f0_consistency`` both read it. Computed with
        grad enabled so a term that first reads it under ``no_grad`` cannot cache a detached
        tensor for the others (without a graph upstream, as in evaluation, none is built).
        """
        with torch.enable_grad():
            return self.schedule.x1_estimate(self.x_t.float(), self.t.float(), self.output.float())


@attrs.frozen
class LossTerm:
    """One loss term of a micro-batch.

    Attributes:
        value: float32 scalar, mean over this term's units in the micro-batch (0 when none).
        count: float, the number of units (target frames or characters).
        unit: "frames" or "chars": terms are weighted across micro-batches by their own unit.
    """

    value: torch.Tensor
    count: float
    unit: str


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, float]:
    """``(mean, count)``: the float32 mean of ``values`` (``[b L]`` or ``[b L c]``) over the
    positions where ``mask [b L]`` holds (and all channels), and the number of such positions.

    Masked entries are replaced by zero before the sum, so they add nothing to the value
    or the gradient even when they hold inf or NaN. With no unmasked position the mean is 0
    (still attached to the graph).
    """
    channels = values.shape[-1] if values.dim() == mask.dim() + 1 else 1
    # float() waits for the device once per term; LossTerm.count is a float because the
    # evaluation pass (flowkit/train/evaluation.py) does float arithmetic on it.
    count = float(mask.sum())
    return _where_mask(values, mask).sum() / max(count * channels, 1.0), count


def _where_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """float32 ``x`` (``[b L]`` or ``[b L c]``) with exact zeros where ``mask [b L]`` is False."""
    zero = torch.zeros((), dtype=torch.float32, device=x.device)
    return torch.where(mask[..., None] if x.dim() == mask.dim() + 1 else mask, x.float(), zero)


def _mean_error(
    diff: torch.Tensor, mask: torch.Tensor, norm: Callable[[torch.Tensor], torch.Tensor]
) -> tuple[torch.Tensor, float]:
    """`masked_mean` of ``norm(diff)`` (square, abs), with ``diff`` masked before the norm:
    a NaN or inf outside the mask would otherwise reach the gradient (d|x|/dx * 0 = NaN)."""
    return masked_mean(norm(_where_mask(diff, mask)), mask)


@register("loss", "masked_mse")
@attrs.frozen
class MaskedMSE:
    """Flow loss: squared error between output and target, averaged over target frames and
    channels (Lipman et al. 2023; F5-TTS)."""

    weight: float = 1.0

    def __call__(self, inputs: LossInputs) -> LossTerm:
        """The mean over target frames and channels; ``count`` = target frames."""
        diff = inputs.output.float() - inputs.target.float()
        value, count = _mean_error(diff, inputs.loss_mask, torch.square)
        return LossTerm(value, count, "frames")


@register("loss", "mel_l1")
@attrs.frozen
class MelL1:
    """Auxiliary L1 between the data implied by the output (``schedule.x1_estimate``) and the
    data, on target frames; the latent is a mel spectrogram for the default encoder. Weight
    0.5 as an auxiliary term is the usual start."""

    weight: float = 0.5

    def __call__(self, inputs: LossInputs) -> LossTerm:
        """The mean absolute error over target frames and channels; ``count`` = target frames."""
        diff = inputs.x1_estimate - inputs.x1.float()
        value, count = _mean_error(diff, inputs.loss_mask, torch.abs)
        return LossTerm(value, count, "frames")


@register("loss", "duration_l1")
@attrs.frozen
class DurationL1:
    """Duration loss of the aligned text path (seed "E11"): ``|log_duration - target|`` with
    the target ``log(1 + mean char duration of its unit)`` for real characters inside units
    and ``log(1 + pause / separators)`` for the separator characters between two units
    (`flowkit.model.durations.char_duration_targets`).

    Raises:
        ConfigError: the model predicts no durations (unaligned text path).
    """

    weight: float = 1.0

    def __call__(self, inputs: LossInputs) -> LossTerm:
        """The mean over in-unit and pause characters; ``count`` = characters."""
        if inputs.log_duration is None:
            raise ConfigError(
                "loss.duration_l1 needs durations: set model.dit.text_path = 'aligned' or drop "
                "@loss.duration_l1() from the losses"
            )
        target, mask = char_duration_targets(inputs.cond)
        value, count = _mean_error(inputs.log_duration.float() - target, mask, torch.abs)
        return LossTerm(value, count, "chars")


@register("loss", "f0_consistency")
@attrs.frozen
class F0Consistency:
    """L1 between the F0 contour of the data implied by the output and that of the data, on
    target frames. The F0 extractor is injected (``f0_extractor(latents [b n d]) -> f0 [b n]``,
    e.g. a small pitch network over mel frames); ``None`` disables the term."""

    f0_extractor: Callable[[torch.Tensor], torch.Tensor] | None = None
    weight: float = 0.1

    def __call__(self, inputs: LossInputs) -> LossTerm | None:
        """The mean absolute F0 difference over target frames, or None without an extractor."""
        if self.f0_extractor is None:
            return None
        with torch.no_grad():
            f0_true = self.f0_extractor(inputs.x1.float()).float()
        diff = self.f0_extractor(inputs.x1_estimate).float() - f0_true
        value, count = _mean_error(diff, inputs.loss_mask, torch.abs)
        return LossTerm(value, count, "frames")
