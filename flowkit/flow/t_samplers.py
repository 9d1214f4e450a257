"""Samplers of the flow time t in [0, 1] for training items (t=0 noise, t=1 data).

Each draws on the CPU from an explicit ``torch.Generator`` so a run does not depend on its
device, and returns float32 ``[n]``.
"""

from __future__ import annotations

import attrs
import torch

from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["LogitNormal", "Uniform"]


@register("t_sampler", "uniform")
@attrs.frozen
class Uniform:
    """t ~ U[0, 1) (Lipman et al. 2023; the F5-TTS default)."""

    def __call__(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` times, float32 ``[n]`` on the CPU."""
        return torch.rand(n, generator=generator, dtype=torch.float32)


@register("t_sampler", "logit_normal")
@attrs.frozen
class LogitNormal:
    """t = sigmoid(u), u ~ N(mean, std^2): more training on the middle of the path, where the
    velocity is hardest to predict (Esser et al. 2024, "Scaling Rectified Flow Transformers
    for High-Resolution Image Synthesis", SD3; they use mean 0, std 1).

    Raises:
        ConfigError: ``std`` not positive.
    """

    mean: float = 0.0  # > 0 leans towards data (t=1), < 0 towards noise
    std: float = 1.0  # > 0

    def __attrs_post_init__(self) -> None:
        if not self.std > 0:
            raise ConfigError(
                f"t_sampler.logit_normal.std = {self.std!r} must be > 0 (SD3 uses 1.0)"
            )

    def __call__(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``n`` times in (0, 1), float32 ``[n]`` on the CPU."""
        u = torch.randn(n, generator=generator, dtype=torch.float32)
        return torch.sigmoid(u * self.std + self.mean)
