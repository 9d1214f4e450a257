"""The CPU kernels of flowkit.model.cpu_kernels compute what the nn modules they replace compute."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from flowkit.model.cpu_kernels import Dropout, GroupedConv1d


@pytest.mark.parametrize(("channels", "kernel", "groups"), [(64, 31, 16), (32, 7, 32), (24, 3, 1)])
def test_grouped_conv_equals_nn_conv1d_forward_and_backward(channels, kernel, groups):
    torch.manual_seed(0)
    ref = nn.Conv1d(channels, channels, kernel, padding=kernel // 2, groups=groups)
    conv = GroupedConv1d(channels, channels, kernel, padding=kernel // 2, groups=groups)
    conv.load_state_dict(ref.state_dict())
    assert list(conv.state_dict()) == list(ref.state_dict())  # checkpoints load either way
    base = torch.randn(3, 50, channels)
    outs, grads = [], []
    for module in (ref, conv):
        x = base.clone().requires_grad_(True)
        y = module(x.transpose(1, 2))  # a transposed view, as the position embedding passes it
        (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
        outs.append(y.detach())
        grads.append([x.grad, module.weight.grad, module.bias.grad])
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    for mine, theirs in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)


def test_grouped_conv_leaves_the_mkldnn_switch_as_it_was():
    conv = GroupedConv1d(16, 16, 5, padding=2, groups=4)
    x = torch.randn(2, 16, 9, requires_grad=True)
    before = torch.backends.mkldnn.enabled
    conv(x).sum().backward()
    assert torch.backends.mkldnn.enabled == before


def test_grouped_conv_bfloat16_takes_the_plain_path():
    torch.manual_seed(1)
    conv = GroupedConv1d(16, 16, 5, padding=2, groups=4).bfloat16()
    x = torch.randn(2, 16, 9).bfloat16()
    torch.testing.assert_close(conv(x), nn.functional.conv1d(x, conv.weight, conv.bias, padding=2, groups=4))


def test_dropout_keeps_one_minus_p_and_scales_the_kept_values():
    torch.manual_seed(0)
    p = 0.1
    drop = Dropout(p).train()
    x = torch.rand(400, 500) + 0.5  # no zeros of its own
    x.requires_grad_(True)
    y = drop(x)
    kept = y != 0
    share = kept.float().mean().item()
    sigma = math.sqrt(p * (1 - p) / x.numel())
    assert abs(share - (1 - p)) < 5 * sigma, share
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    y.sum().backward()  # the gradient is the same mask and scale
    torch.testing.assert_close(x.grad, kept.float() / (1 - p))


def test_dropout_draws_from_the_default_generator_and_is_identity_in_eval():
    drop = Dropout(0.3).train()
    x = torch.randn(64, 64)
    torch.manual_seed(7)
    a = drop(x)
    torch.manual_seed(7)
    b = drop(x)
    torch.manual_seed(8)
    c = drop(x)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(drop.eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
