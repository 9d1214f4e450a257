"""Fixed-step ODE solvers that carry noise ``x0`` (t=0) to data (t=1).

``field(x, t)`` returns dx/dt ``[b n d]`` for the state ``x [b n d]`` at the scalar time
tensor ``t`` (0-dim, float32, on ``x``'s device); schedules turn a network output into
dx/dt (`flowkit.flow.schedules`), and CFG is applied inside the field.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import torch

from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["Euler", "Midpoint", "time_grid"]

Field = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def time_grid(steps: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """``steps + 1`` evenly spaced times from 0 to 1, float32 ``[steps + 1]``.

    Raises:
        ConfigError: ``steps`` < 1.
    """
    if int(steps) < 1:
        raise ConfigError(f"solver steps = {steps!r} must be >= 1 (F5-TTS samples with 32)")
    return torch.linspace(0.0, 1.0, int(steps) + 1, dtype=torch.float32, device=device)


class _FixedStepSolver:
    """A solver on the uniform `time_grid`; subclasses define one ``step``."""

    def __call__(self, field: Field, x0: torch.Tensor, steps: int) -> torch.Tensor:
        """``x1 [b n d]`` after ``steps`` steps of ``step`` from ``x0 [b n d]`` at t=0.

        Raises:
            ConfigError: ``steps`` < 1.
        """
        grid = time_grid(steps, x0.device)
        x = x0
        for t, t_next in zip(grid[:-1], grid[1:], strict=True):
            x = self.step(field, x, t, t_next - t)
        return x

    @staticmethod
    def step(field: Field, x: torch.Tensor, t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


@register("solver", "euler")
@attrs.frozen
class Euler(_FixedStepSolver):
    """Explicit Euler: one field evaluation per step (first order)."""

    @staticmethod
    def step(field: Field, x: torch.Tensor, t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``x + h field(x, t)``."""
        return x + h * field(x, t)


@register("solver", "midpoint")
@attrs.frozen
class Midpoint(_FixedStepSolver):
    """Explicit midpoint (second-order Runge-Kutta): two field evaluations per step."""

    @staticmethod
    def step(field: Field, x: torch.Tensor, t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``x + h field(x_half, t + h/2)`` with the Euler half step ``x_half = x + (h/2) field(x, t)``."""
        half = x + (h / 2) * field(x, t)
        return x + h * field(half, t + h / 2)
