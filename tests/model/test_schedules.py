"""Schedules, t-samplers and solvers: endpoints, exact fields, registration, gin."""

from __future__ import annotations

import re

import gin
import pytest
import torch

from flowkit import registry
from flowkit.errors import ConfigError
from flowkit.flow import schedules, solvers, t_samplers
from flowkit.flow.schedules import CosineVPred, FlowMatching
from flowkit.flow.solvers import Euler, Midpoint
from flowkit.flow.t_samplers import LogitNormal, Uniform

SCHEDULES = [FlowMatching(), FlowMatching(sigma_min=0.1), CosineVPred()]


def _pair(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, 5, 4, generator=g, dtype=torch.float64), torch.randn(
        3, 5, 4, generator=g, dtype=torch.float64
    )


@pytest.mark.parametrize("schedule", [FlowMatching(), CosineVPred()], ids=repr)
def test_endpoints(schedule):
    x0, x1 = _pair()
    at0, _ = schedule.sample(x0, x1, torch.zeros(3, dtype=torch.float64))
    at1, _ = schedule.sample(x0, x1, torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(at0, x0)
    torch.testing.assert_close(at1, x1)


def test_sigma_min_keeps_noise_floor_at_data():
    x0, x1 = _pair()
    at1, _ = FlowMatching(sigma_min=0.1).sample(x0, x1, torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(at1, x1 + 0.1 * x0)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_velocity_is_the_path_derivative_and_x1_estimate_inverts(schedule):
    x0, x1 = _pair(1)
    t = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    x_t, target = schedule.sample(x0, x1, t)
    eps = 1e-6
    numeric = (schedule.sample(x0, x1, t + eps)[0] - schedule.sample(x0, x1, t - eps)[0]) / (
        2 * eps
    )
    torch.testing.assert_close(schedule.velocity(x_t, t, target), numeric, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(schedule.x1_estimate(x_t, t, target), x1)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
@pytest.mark.parametrize("solver", [Euler(), Midpoint()], ids=repr)
def test_exact_field_carries_noise_to_point_mass_data(schedule, solver):
    # With all data at one point x1, the exact marginal field at (x, t) is the target of the
    # unique noise x0 whose path passes through x at t.
    x0, x1 = _pair(2)

    def noise_through(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        tt = t.expand(3)
        # x_t = A(t) x0 + B(t) x1: read B(t) x1 and A(t) off the schedule itself.
        zero = torch.zeros_like(x1)
        b_part, _ = schedule.sample(zero, x1, tt)
        a_one, _ = schedule.sample(torch.ones_like(x1), zero, tt)
        return (x - b_part) / a_one

    def field(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        _, target = schedule.sample(noise_through(x, t), x1, t.expand(3))
        return schedule.velocity(x, t.expand(3), target)

    out = solver(field, x0, 1000)
    torch.testing.assert_close(
        out, schedule.sample(x0, x1, torch.ones(3, dtype=torch.float64))[0], atol=2e-3, rtol=0
    )


def test_solvers_integrate_a_known_ode():
    # dx/dt = x from x(0)=1 gives e at t=1; midpoint is far more accurate than Euler.
    x0 = torch.ones(1, 1, 1, dtype=torch.float64)
    euler = Euler()(lambda x, t: x, x0, 20).item()
    mid = Midpoint()(lambda x, t: x, x0, 20).item()
    e = torch.e
    assert abs(mid - e) < 2e-3 < 2e-2 < abs(euler - e)


def test_solver_passes_scalar_times_in_order():
    seen: list[torch.Tensor] = []
    Euler()(lambda x, t: seen.append(t) or torch.zeros_like(x), torch.zeros(1, 1, 1), 4)
    assert all(t.dim() == 0 for t in seen)
    assert [round(float(t), 4) for t in seen] == [0.0, 0.25, 0.5, 0.75]


def test_solver_rejects_zero_steps():
    with pytest.raises(ConfigError, match="steps = 0 must be >= 1"):
        Euler()(lambda x, t: x, torch.zeros(1, 1, 1), 0)


@pytest.mark.parametrize(
    "sampler", [Uniform(), LogitNormal(), LogitNormal(mean=0.5, std=2.0)], ids=repr
)
def test_t_samplers_are_deterministic_cpu_float32_in_unit_interval(sampler):
    a = sampler(1000, torch.Generator().manual_seed(7))
    b = sampler(1000, torch.Generator().manual_seed(7))
    assert a.dtype == torch.float32 and a.device.type == "cpu" and a.shape == (1000,)
    assert torch.equal(a, b)
    assert float(a.min()) >= 0.0 and float(a.max()) <= 1.0


def test_logit_normal_concentrates_in_the_middle():
    t = LogitNormal()(20_000, torch.Generator().manual_seed(0))
    u = Uniform()(20_000, torch.Generator().manual_seed(0))
    middle = lambda x: float(((x > 0.25) & (x < 0.75)).float().mean())  # noqa: E731
    assert middle(t) > middle(u) + 0.1
    assert abs(float(torch.logit(t.double()).mean())) < 0.05


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: FlowMatching(sigma_min=1.0),
            r"schedule.flow_matching.sigma_min = 1.0 must be in \[0, 1\)",
        ),
        (lambda: LogitNormal(std=0.0), r"t_sampler.logit_normal.std = 0.0 must be > 0"),
    ],
)
def test_bad_settings_raise_one_line_config_errors(make, match):
    with pytest.raises(ConfigError) as info:
        make()
    # gin appends an "In call to configurable ..." line of its own; ours is the first line.
    assert re.match(match, str(info.value).splitlines()[0])


def test_registered_and_gin_configurable():
    for kind, name, module in [
        ("schedule", "flow_matching", schedules),
        ("schedule", "cosine_vpred", schedules),
        ("t_sampler", "uniform", t_samplers),
        ("t_sampler", "logit_normal", t_samplers),
        ("solver", "euler", solvers),
        ("solver", "midpoint", solvers),
    ]:
        assert registry.get(kind, name).module == module.__name__
    gin.parse_config(
        "schedule.flow_matching.sigma_min = 0.1\n"
        "t_sampler.logit_normal.mean = -0.5\n"
        "t_sampler.logit_normal.std = 0.7\n"
    )
    assert registry.get("schedule", "flow_matching").obj().sigma_min == 0.1
    sampler = registry.get("t_sampler", "logit_normal").obj()
    assert (sampler.mean, sampler.std) == (-0.5, 0.7)


def test_gin_references_build_components():
    @gin.configurable("probe_entry")
    def probe_entry(schedule=None, t_sampler=None, solver=None):
        return schedule, t_sampler, solver

    gin.parse_config(
        "probe_entry.schedule = @schedule.cosine_vpred()\n"
        "probe_entry.t_sampler = @t_sampler.uniform()\n"
        "probe_entry.solver = @solver.midpoint()\n"
    )
    schedule, sampler, solver = probe_entry()
    assert (
        isinstance(schedule, CosineVPred)
        and isinstance(sampler, Uniform)
        and isinstance(solver, Midpoint)
    )
