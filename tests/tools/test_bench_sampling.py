"""tools/bench_sampling.py's flowkit side and its stand-in integrator (the F5-TTS side needs
F5-TTS's source tree and is not run here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("bench_sampling", REPO / "tools" / "bench_sampling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
def test_the_flowkit_side_samples_the_items_lengths(text_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _tool()
    monkeypatch.setattr(tool, "STEPS", 2)  # the call, not the ODE, is tested
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    items = tool.make_items(2, seed=0, frames=24)
    out = tool.FlowkitSampler(text_path, items)()
    totals = [len(it["prompt"]) + it["target_frames"] for it in items]
    assert out.shape == (2, max(totals), tool.MEL) and torch.isfinite(out).all()
    assert totals[0] == 24 and totals[1] < 24  # unequal lengths: the batch is padded
    assert torch.count_nonzero(out[1, totals[1]:]) == 0
    torch.set_num_threads(before)


def test_the_stand_in_integrator_is_torchdiffeqs_euler() -> None:
    torchdiffeq = pytest.importorskip("torchdiffeq")
    tool = _tool()
    t = torch.linspace(0, 1, 9) - 0.3 * (torch.cos(torch.pi / 2 * torch.linspace(0, 1, 9)) - 1
                                         + torch.linspace(0, 1, 9))
    y0 = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0))

    def fn(time: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.sin(3 * time) - 0.5 * y

    expected = torchdiffeq.odeint(fn, y0, t, method="euler")
    torch.testing.assert_close(tool._euler_odeint(fn, y0, t), expected, rtol=0, atol=1e-6)


def test_the_profile_puts_each_sides_products_under_block_gemms(capsys: pytest.CaptureFixture[str]) -> None:
    tool = _tool()
    a, w, big = torch.randn(256, 256), torch.randn(256, 256), torch.randn(1000, 1000)  # big: > 0.05 ms of sines
    sides = {"products": lambda: torch.nn.functional.linear(a, w), "sines": lambda: torch.sin(big)}
    tool.profile_side_by_side(sides, "test", calls=2, rows=3)
    # "  CATEGORY (22 wide) MS MS": the category, then one column per side
    rows = {line[2:24].strip(): line[24:].split() for line in capsys.readouterr().out.splitlines()
            if line.startswith("  ") and len(line[24:].split()) == 2}
    gemm_products, gemm_sines = (float(v) for v in rows["block GEMMs"])
    assert gemm_products > 0 and gemm_sines == 0  # linear is a product; sin is not
    assert float(rows["element-wise"][1]) > 0
