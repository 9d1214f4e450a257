"""The loss plugin of docs/plugins.md ("A loss"), run as written: it registers, meets the
Loss protocol, and on a micro-batch equals torch's Huber loss over the target frames, with
padding and prompt frames (holding NaN and inf) adding exactly zero to value and gradient."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from model_fixtures import collate, make_item

from flowkit import registry
from flowkit.flow.schedules import FlowMatching
from flowkit.losses import LossInputs

REPO = Path(__file__).resolve().parents[2]


def _example_source() -> str:
    page = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = page.split("### A loss", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


@pytest.fixture
def example_registered():
    """The example's component registered for this test only (the registry is process-wide)."""
    import gin

    namespace: dict = {"__name__": "docs_plugins_example"}
    exec(compile(_example_source(), "docs/plugins.md", "exec"), namespace)  # registers loss.masked_huber
    yield
    registry._REGISTRY.pop(("loss", "masked_huber"), None)
    gin.config._REGISTRY.pop("loss.masked_huber")


def test_the_documented_loss_plugin_runs_as_written(example_registered) -> None:
    component = registry.get("loss", "masked_huber")
    loss = component.obj(weight=0.1, delta=0.5)
    registry.check_kind(loss, "loss", where="Trainer.losses[1]")

    x0, x1, cond = collate([make_item(30, 4, seed=5), make_item(18, 2, seed=6)], pad_frames=3, pad_chars=2)
    t = torch.tensor([0.3, 0.8])
    schedule = FlowMatching()
    x_t, target = schedule.sample(x0, x1, t)
    output = (target + torch.randn(target.shape, generator=torch.Generator().manual_seed(0))).requires_grad_(True)
    mask = cond.target_mask & cond.frame_mask
    with torch.no_grad():
        output[~mask] = float("nan")
        output[(~mask).nonzero()[:1].unbind(1)] = float("inf")
    term = loss(LossInputs(output, target, x0, x1, x_t, t, cond, schedule))
    expected = torch.nn.functional.huber_loss(output[mask], target[mask], delta=0.5)
    # float32 sums in another order: agree to a few ulps of values near 0.3
    assert torch.allclose(term.value, expected, rtol=1e-6, atol=0.0), (term.value, expected)
    assert term.count == float(mask.sum()) and term.unit == "frames"
    term.value.backward()
    assert torch.isfinite(output.grad).all() and (output.grad[~mask] == 0).all()
