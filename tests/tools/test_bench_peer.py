"""tools/bench_peer.py's flowkit side: one training step on both text paths through the
objective API the training loop uses (the F5-TTS side needs F5-TTS's source tree and is
not run here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("bench_peer", REPO / "tools" / "bench_peer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
def test_the_flowkit_side_takes_a_training_step(text_path: str) -> None:
    tool = _tool()
    side = tool.FlowkitSide(text_path, tool.make_data(2, 48, seed=0))
    before = [p.detach().clone() for p in side.model.parameters()]
    # Two steps: the zero-initialised output and adaLN layers pass no gradient upstream in
    # the first one, and flowkit's optimizer does not decay vectors (biases, gains).
    side.step()
    side.step()
    changed = sum(not torch.equal(a, p) for a, p in zip(before, side.model.parameters(), strict=True))
    assert changed > len(before) // 2
    assert all(torch.isfinite(p).all() for p in side.model.parameters())


def test_the_text_encoder_sizes_reach_the_flowkit_side() -> None:
    """``--text-dim 256 --conv-layers 4`` (the other side-by-side) builds that model."""
    tool = _tool()
    data = tool.make_data(2, 48, seed=0)
    small, large = tool.FlowkitSide("unaligned", data), tool.FlowkitSide("unaligned", data, text_dim=256, conv_layers=4)
    assert small.model.cfg.text_dim == 128 and small.model.cfg.conv_layers == 2
    assert large.model.cfg.text_dim == 256 and large.model.cfg.conv_layers == 4
    assert tool.n_params(large.model) > tool.n_params(small.model)


def test_conv_kernels_times_every_grouped_conv_kernel_and_puts_the_choice_back(
        capsys: pytest.CaptureFixture[str]) -> None:
    from torch import nn

    from flowkit.converters.cpu import KERNELS, convert_cpu_kernels, converted_kernels

    tool = _tool()
    seen = []

    class Side:
        model = convert_cpu_kernels(nn.Sequential(nn.Conv1d(32, 32, 7, padding=3, groups=4)),
                                    {"grouped_conv": "channels_last"})

        def step(self) -> None:
            seen.append(converted_kernels(self.model)["grouped_conv"])

    side = Side()
    tool.conv_kernels(side, "unaligned", 2)
    assert converted_kernels(side.model)["grouped_conv"] == "channels_last"  # the measured choice is back
    kernels = list(KERNELS["grouped_conv"])
    assert seen == kernels + kernels + kernels[::-1]  # one warm-up each, then alternated
    line = capsys.readouterr().out
    assert all(f"{k} " in line for k in kernels) and "torch" in line and "(1.000)" in line


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
def test_roofline_prints_the_ceiling_of_the_counted_work(text_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The ceiling splits the step's counted FLOPs into block GEMMs, attention and the rest:
    attention's count must be the quadratic term `flowkit.model.flops` counts, so the rest
    is what the input stage, text encoder and conditioning add (positive, a minority)."""
    import re

    from flowkit.model.flops import train_step_flops

    tool = _tool()
    data = tool.make_data(2, 48, seed=0)
    side = tool.FlowkitSide(text_path, data)
    chars = [len(c) for c in data["chars"]] if text_path == "aligned" else None
    step_flops = train_step_flops(side.model, [48, 48], chars)
    gemm_flops, gemm_s, _ = tool.gemm_rate(96, reps=1)
    attn_flops, attn_s = tool.attention_rate(2, 48, reps=1)
    assert gemm_s > 0 and attn_s > 0
    other = step_flops - gemm_flops - attn_flops
    assert 0 < other < 0.5 * step_flops
    tool.roofline(side.model, data, text_path, median_s=10.0)  # a slow step: the ceiling is far above it
    out = capsys.readouterr().out
    printed_other = float(re.search(r"the other ([\d.]+) GFLOP at the GEMM rate", out).group(1))
    assert printed_other == pytest.approx(other / 1e9, abs=0.051)
    share = int(re.search(r"share (\d+)% \(target", out).group(1))
    ceiling = int(re.search(r"share at most (\d+)%", out).group(1))
    assert share < ceiling  # a 10 s step is far slower than its counted work at the measured rates
    assert "leaving" in out and "now the step less the counted work" in out
