"""Sway sampling of the solvers' time grid (F5-TTS paper, sec. 3.3)."""

from __future__ import annotations

import math

import pytest
import torch

from flowkit.errors import ConfigError
from flowkit.flow.solvers import Euler, describe_solver, time_grid


def test_sway_grid_matches_the_paper_formula() -> None:
    grid = time_grid(4, sway=-1.0)
    expected = [u + -1.0 * (math.cos(math.pi / 2 * u) - 1 + u) for u in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert torch.allclose(grid, torch.tensor(expected), atol=1e-7)
    assert grid[0] == 0.0 and grid[-1] == 1.0
    # s = -1 crowds the steps near t = 0: the first step is the smallest
    steps = grid.diff()
    assert steps[0] < steps[-1]
    assert torch.equal(time_grid(4, sway=None), torch.linspace(0, 1, 5))


def test_solver_uses_the_swayed_grid_and_says_so() -> None:
    seen: list[float] = []

    def field(x, t):
        seen.append(float(t))
        return torch.zeros_like(x)

    Euler(sway=-1.0)(field, torch.zeros(1, 2, 3), 4)
    assert seen == pytest.approx(time_grid(4, sway=-1.0)[:-1].tolist())
    assert describe_solver(Euler(sway=-1.0)) == "euler, sway -1" and describe_solver(Euler()) == "euler"


def test_sway_out_of_range_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"sway = 2.0 must be in \[-1, 1\]"):
        time_grid(4, sway=2.0)


def test_f5_infer_gin_sets_sway(tmp_path) -> None:
    import gin

    from flowkit import config as gin_config
    from flowkit.train.settings import Trainer

    repo = __import__("pathlib").Path(__file__).resolve().parents[2]
    gin_config.parse([repo / "gin" / "base.gin", repo / "gin" / "f5_infer.gin"], ["DATA = []"])
    try:
        assert Trainer().solver == Euler(sway=-1.0)
    finally:
        gin.clear_config()
