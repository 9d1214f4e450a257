"""Noise schedules: the probability path from noise ``x0`` (t=0) to data ``x1`` (t=1).

Shape legend: b batch, n frames, d latent channels. ``t`` is ``[b]`` (one time per item)
or a scalar; it is broadcast over frames and channels.

A schedule says three things: where a training sample lies on the path and what the network
should predict there (`sample`), how to turn the network output into dx/dt for an ODE
solver and for classifier-free guidance (`velocity`), and what clean data the output
implies (`x1_estimate`, used by auxiliary losses such as ``loss.mel_l1``).
"""

from __future__ import annotations

import math

import attrs
import torch

from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["CosineVPred", "FlowMatching"]


def _per_item(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``t`` ([b] or scalar) shaped to broadcast against ``like`` ``[b n d]``, in its dtype."""
    t = torch.as_tensor(t, device=like.device, dtype=like.dtype)
    return t.reshape(-1, *([1] * (like.dim() - 1))) if t.dim() > 0 else t


@register("schedule", "flow_matching")
@attrs.frozen
class FlowMatching:
    """Straight (optimal-transport) path with velocity target (Lipman et al. 2023, "Flow
    Matching for Generative Modeling").

    ``x_t = (1 - (1 - sigma_min) t) x0 + t x1``; the network predicts the constant velocity
    ``x1 - (1 - sigma_min) x0``. ``sigma_min = 0`` (the F5-TTS choice) makes t=1 exactly the
    data; a small positive value keeps a floor of noise around each data point.

    Raises:
        ConfigError: ``sigma_min`` outside [0, 1).
    """

    sigma_min: float = 0.0  # [0, 1); 0 = F5-TTS

    def __attrs_post_init__(self) -> None:
        if not 0.0 <= self.sigma_min < 1.0:
            raise ConfigError(
                f"schedule.flow_matching.sigma_min = {self.sigma_min!r} must be in [0, 1) (0 is the usual choice)"
            )

    def sample(
        self, x0: torch.Tensor, x1: torch.Tensor, t: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_t [b n d], target velocity [b n d])`` for noise ``x0``, data ``x1``, time ``t [b]``."""
        a = 1.0 - self.sigma_min
        tt = _per_item(t, x1)
        return (1.0 - a * tt) * x0 + tt * x1, x1 - a * x0

    def velocity(self, x_t: torch.Tensor, t: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        """dx/dt ``[b n d]``: the output is the velocity itself."""
        return output

    def x1_estimate(self, x_t: torch.Tensor, t: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        """Data implied by velocity ``output`` at ``(x_t, t)``: ``a x_t + (1 - a t) v``, a = 1 - sigma_min."""
        a = 1.0 - self.sigma_min
        tt = _per_item(t, x_t)
        return a * x_t + (1.0 - a * tt) * output


@register("schedule", "cosine_vpred")
@attrs.frozen
class CosineVPred:
    """Cosine (variance-preserving) path with v-prediction (Salimans & Ho 2022,
    "Progressive Distillation for Fast Sampling of Diffusion Models"; Nichol & Dhariwal 2021
    for the cosine path).

    With ``alpha = sin(pi t / 2)`` (signal) and ``sigma = cos(pi t / 2)`` (noise):
    ``x_t = alpha x1 + sigma x0`` and the target is ``v = alpha x0 - sigma x1``. Because
    ``dx_t/dt = (pi / 2)(sigma x1 - alpha x0) = -(pi / 2) v``, an ODE solver integrates
    ``-(pi/2) v`` from t=0 to 1; the clean estimate is ``alpha x_t - sigma v``.
    """

    def _coefs(self, t: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angle = _per_item(t, like) * (math.pi / 2)
        return torch.sin(angle), torch.cos(angle)

    def sample(
        self, x0: torch.Tensor, x1: torch.Tensor, t: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_t [b n d], v target [b n d])`` for noise ``x0``, data ``x1``, time ``t [b]``."""
        alpha, sigma = self._coefs(t, x1)
        return alpha * x1 + sigma * x0, alpha * x0 - sigma * x1

    def velocity(self, x_t: torch.Tensor, t: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        """dx/dt ``[b n d]`` from the v-prediction ``output``: ``-(pi/2) v``."""
        return output * (-math.pi / 2)

    def x1_estimate(self, x_t: torch.Tensor, t: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        """Data implied by ``output`` (v) at ``(x_t, t)``: ``alpha x_t - sigma v``."""
        alpha, sigma = self._coefs(t, x_t)
        return alpha * x_t - sigma * output
