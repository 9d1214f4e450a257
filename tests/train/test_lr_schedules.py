"""LR schedules against a table of expected multipliers."""

from __future__ import annotations

import pytest

from flowkit.errors import ConfigError
from flowkit.registry import get
from flowkit.train.lr_schedules import Constant, WarmupCosine

# (update, multiplier) for warmup 4, floor 0.1, horizon 14: cosine over updates 4..13.
WARMUP_COSINE_TABLE = [
    (0, 0.25),
    (1, 0.50),
    (3, 1.00),
    (4, 1.00),  # cosine starts at its peak
    (6, 0.1 + 0.9 * (1 + 0.8090169943749475) / 2),  # progress 0.2: cos(0.2 pi)
    (9, 0.55),  # half way: the mean of peak and floor
    (13, 0.1 + 0.9 * (1 - 0.9510565162951535) / 2),  # progress 0.9
    (14, 0.10),  # the horizon: the floor
    (1000, 0.10),  # past the horizon: stays on the floor
]


@pytest.mark.parametrize(("update", "expected"), WARMUP_COSINE_TABLE)
def test_warmup_cosine_table(update, expected):
    assert WarmupCosine(warmup_updates=4, floor_ratio=0.1)(update, 14) == pytest.approx(
        expected, abs=1e-12
    )


def test_warmup_cosine_defaults_from_vox():
    s = WarmupCosine()
    assert (s.warmup_updates, s.floor_ratio) == (2000, 0.01)
    assert s(1999, 100_000) == 1.0
    assert s(100_000, 100_000) == 0.01


def test_no_warmup_and_monotone_decay():
    s = WarmupCosine(warmup_updates=0, floor_ratio=0.0)
    assert s(0, 10) == 1.0
    values = [s(u, 10) for u in range(11)]
    assert values == sorted(values, reverse=True) and values[-1] == 0.0


def test_horizon_inside_warmup_goes_to_the_floor():
    s = WarmupCosine(warmup_updates=100, floor_ratio=0.05)
    assert s(9, 10) == pytest.approx(0.1)
    assert s(10, 10) == 0.05


@pytest.mark.parametrize(("update", "expected"), [(0, 1 / 3), (2, 1.0), (3, 1.0), (10**6, 1.0)])
def test_constant_table(update, expected):
    assert Constant(warmup_updates=3)(update, 10) == pytest.approx(expected)
    assert Constant()(update, 10) == 1.0


def test_bad_values():
    with pytest.raises(ConfigError, match="floor_ratio=1.5"):
        WarmupCosine(floor_ratio=1.5)
    with pytest.raises(ConfigError, match="warmup_updates=-1"):
        Constant(warmup_updates=-1)


def test_registered():
    assert get("lr_schedule", "warmup_cosine").obj is WarmupCosine
    assert get("lr_schedule", "constant").obj is Constant
