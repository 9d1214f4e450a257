"""Flow-time samplers from SD3 (Esser et al. 2024, section 3.1), as flowkit plugins.

Each sampler maps uniform draws ``u`` from the caller's generator to flow times ``t``
in [0, 1] (flowkit's convention: t = 0 noise, t = 1 data). Draws happen on the CPU so a
run does not depend on its device.
"""

from __future__ import annotations

import math

import attrs
import torch

import flowkit


@flowkit.register("t_sampler", "mode")
@attrs.frozen
class ModeSampler:
    """Mode sampling with heavy tails; ``scale`` > 0 favours mid-path times (SD3 eq. 20).

    Args:
        scale: the skew ``s`` of the paper, in [-1, 2/(pi-2)] so the map stays monotone;
            SD3 reports 1.29 as its best setting.

    Raises:
        ValueError: ``scale`` outside the monotone range.
    """

    scale: float = 1.29

    def __attrs_post_init__(self) -> None:
        limit = 2.0 / (math.pi - 2.0)
        if not -1.0 <= self.scale <= limit:
            raise ValueError(
                f"t_sampler.mode.scale = {self.scale} is outside [-1, {limit:.3f}]; "
                "pick a value in that range (1.29 is the paper's)"
            )

    def __call__(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` flow times, float32 ``[n]`` on the CPU."""
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        t = 1.0 - u - self.scale * (torch.cos(math.pi / 2.0 * u) ** 2 - 1.0 + u)
        # the paper's map sends u to the *noise* fraction; flip to flowkit's t = 0 noise
        return (1.0 - t).clamp(0.0, 1.0).to(torch.float32)


@flowkit.register("t_sampler", "cosmap")
@attrs.frozen
class CosMapSampler:
    """The cosine map: the time density of a cosine schedule, used by a straight path."""

    def __call__(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` flow times, float32 ``[n]`` on the CPU."""
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        t = 1.0 - 1.0 / (torch.tan(math.pi / 2.0 * u) + 1.0)
        return (1.0 - t).clamp(0.0, 1.0).to(torch.float32)
