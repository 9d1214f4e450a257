"""Fixed-step ODE solvers that carry noise ``x0`` (t=0) to data (t=1).

``field(x, t)`` returns dx/dt ``[b n d]`` for the state ``x [b n d]`` at the scalar time
tensor ``t`` (0-dim, float32, on ``x``'s device); schedules turn a network output into
dx/dt (`flowkit.flow.schedules`), and CFG is applied inside the field.

Every solver takes ``sway``: F5-TTS's sway sampling of the time grid (Chen et al. 2024,
"F5-TTS: A Fairytaler that Fakes Fluent and Faithful Speech with Flow Matching", sec. 3.3:
``t = u + s (cos(pi u / 2) - 1 + u)`` on the uniform grid ``u``). ``s < 0`` spends more
steps near t = 0 (noise), where the outline of the speech is decided; F5-TTS infers with
``s = -1`` (``gin/f5_infer.gin``); ``None`` keeps the uniform grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs
import torch

from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = ["Euler", "Midpoint", "describe_solver", "time_grid"]

Field = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def time_grid(steps: int, device: torch.device | str = "cpu", sway: float | None = None) -> torch.Tensor:
    """``steps + 1`` times from 0 to 1, float32 ``[steps + 1]``: evenly spaced, or swayed
    by coefficient ``sway`` (F5-TTS: ``u + s (cos(pi u / 2) - 1 + u)``).

    Raises:
        ConfigError: ``steps`` < 1, or a ``sway`` outside [-1, 1] (the grid would leave
            [0, 1] or stop increasing).
    """
    if int(steps) < 1:
        raise ConfigError(f"solver steps = {steps!r} must be >= 1 (F5-TTS samples with 32)")
    u = torch.linspace(0.0, 1.0, int(steps) + 1, dtype=torch.float32, device=device)
    if sway is None:
        return u
    if not -1.0 <= float(sway) <= 1.0:
        raise ConfigError(f"solver sway = {sway!r} must be in [-1, 1] (F5-TTS infers with -1) "
                          "or None for a uniform grid")
    return u + float(sway) * (torch.cos(math.pi / 2 * u) - 1 + u)


@attrs.frozen
class _FixedStepSolver:
    """A solver on the `time_grid` (uniform, or swayed by ``self.sway``); subclasses define one ``step``."""

    sway: float | None = None  # F5-TTS sway coefficient s in [-1, 1] (its inference: -1); None: uniform

    def describe(self) -> str:
        """``"euler"`` or ``"euler, sway -1"``: what a sample's caption records."""
        name = type(self).__name__.lower()
        return name if self.sway is None else f"{name}, sway {self.sway:g}"

    def __call__(self, field: Field, x0: torch.Tensor, steps: int) -> torch.Tensor:
        """``x1 [b n d]`` after ``steps`` steps of ``step`` from ``x0 [b n d]`` at t=0.

        Raises:
            ConfigError: ``steps`` < 1.
        """
        grid = time_grid(steps, x0.device, self.sway)
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


def describe_solver(solver: object) -> str:
    """A solver as samples record it: ``euler``, ``euler, sway -1``; a plugin without
    ``describe`` by its class name."""
    describe = getattr(solver, "describe", None)
    return describe() if callable(describe) else type(solver).__name__.lower()
