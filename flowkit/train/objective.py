"""The training objective of one micro-batch, and how terms combine across micro-batches.

Shape legend: b batch, n frames, d latent channels, nt characters.

For data ``x1 [b n d]``: draw ``t [b]`` with the t-sampler and noise ``x0 [b n d]`` from
the flow generator (both on the CPU, t first, then x0), put ``x_t`` on the schedule's
path, run the model (bf16 autocast on CUDA only) and evaluate every loss term in float32.

Micro-batch weighting: a loss term's ``value`` is its mean over its own units (target
frames, or in-unit characters) in one micro-batch. Over a step of micro-batches ``i``,

    loss = sum_terms  weight_term * sum_i value_i * count_i / total_count

so a step of k micro-batches equals one batch of all their items, for every term at once
(each term by its own unit: a frame-averaged flow loss and a character-averaged duration
loss would otherwise be mixed with the wrong proportions). The unit totals are counted
on the CPU batches before the forward passes, so no device sync is needed for them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import torch

from flowkit import registry
from flowkit.losses import LossInputs, LossTerm
from flowkit.model.conditions import Conditions
from flowkit.model.durations import in_unit_chars

__all__ = [
    "NamedTerm",
    "draw_flow",
    "loss_names",
    "loss_terms",
    "unit_counts",
    "unit_sums",
    "unit_weighted",
]


@attrs.frozen
class NamedTerm:
    """A computed loss term with its config name and coefficient (``loss.<name>.weight``)."""

    name: str
    weight: float
    term: LossTerm


def loss_names(losses: Sequence[Any]) -> list[str]:
    """Registry names of the configured losses (``masked_mse``, ...), made unique."""
    by_type = {c.obj: c.name for c in registry.components("loss")}
    names: list[str] = []
    for loss in losses:
        name = by_type.get(type(loss), type(loss).__name__.lower())
        names.append(name if name not in names else f"{name}_{names.count(name) + 1}")
    return names


def unit_counts(cond: Conditions) -> dict[str, float]:
    """Units of one CPU micro-batch: target frames, and in-unit characters (aligned path)."""
    counts = {"frames": float((cond.target_mask & cond.frame_mask).sum())}
    if cond.char_unit is not None and cond.unit_mask is not None:
        counts["chars"] = float(in_unit_chars(cond.char_unit, cond.text_mask, cond.unit_mask).sum())
    return counts


def unit_sums(conds: Iterable[Conditions]) -> dict[str, float]:
    """Sum of `unit_counts` over the micro-batches of a step (zero allowed: under
    torch.distributed the sums are added over the ranks before the floor of 1)."""
    sums: dict[str, float] = {}
    for cond in conds:
        for unit, count in unit_counts(cond).items():
            sums[unit] = sums.get(unit, 0.0) + count
    return sums


def draw_flow(x1_shape: torch.Size, t_sampler: Any, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(t [b], x0 [b n d])`` drawn on the CPU from ``generator`` (t first)."""
    t = t_sampler(x1_shape[0], generator).float()
    x0 = torch.randn(x1_shape, generator=generator)
    return t, x0


def loss_terms(
    model: torch.nn.Module,
    schedule: Any,
    losses: Sequence[Any],
    names: Sequence[str],
    x1: torch.Tensor,
    cond: Conditions,
    t: torch.Tensor,
    x0: torch.Tensor,
    *,
    autocast: bool,
    phase: str = "predicted",
) -> tuple[list[NamedTerm], torch.Tensor | None]:
    """Every loss term of one micro-batch (float32) and the predicted ``log_duration [b nt]``.

    ``t`` and ``x0`` may be on the CPU; they are moved to ``x1``'s device. Losses that
    return None (disabled) are left out.
    """
    device = x1.device
    t, x0 = t.to(device, non_blocking=True), x0.to(device, non_blocking=True)
    x_t, target = schedule.sample(x0, x1, t)
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
        out = model(x_t, t, cond, phase=phase)
    log_duration = None if out.log_duration is None else out.log_duration.float()
    inputs = LossInputs(
        output=out.output.float(), target=target.float(), x0=x0, x1=x1, x_t=x_t, t=t, cond=cond,
        schedule=schedule, log_duration=log_duration,
    )
    terms = []
    for name, loss in zip(names, losses, strict=True):
        term = loss(inputs)
        if term is not None:
            terms.append(NamedTerm(name, float(getattr(loss, "weight", 1.0)), term))
    return terms, log_duration


def unit_weighted(terms: Sequence[NamedTerm], totals: Mapping[str, float]) -> dict[str, torch.Tensor]:
    """Each term's share of its unit-weighted mean: ``value * count / totals[unit]``.

    Summed over the micro-batches of a step (or the batches of an evaluation pass) whose
    units add up to ``totals`` (`unit_sums`, floored at 1 so a step without any unit of a
    term adds nothing to it), the shares of a term are its mean over all those units:
    the same number one batch of all the items would give. Training and evaluation both
    combine terms through this function.

    Returns:
        ``{term name: scalar tensor}`` (before ``loss.<name>.weight``), attached to the graph.
    """
    return {t.name: t.term.value * (t.term.count / totals[t.term.unit]) for t in terms}
