"""The CPU layers of flowkit.converters.cpu_kernels compute what the nn modules they replace compute."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from flowkit.converters.cpu import convert_cpu_kernels, revert_cpu_kernels
from flowkit.converters.cpu_kernels import ONEDNN_MIN_ROWS, onednn_linear_kernel


def GroupedConv1d(*args, **kwargs) -> nn.Module:  # noqa: N802 -- a layer as the converter makes it
    return convert_cpu_kernels(nn.Conv1d(*args, **kwargs))


def Linear(*args, **kwargs) -> nn.Module:  # noqa: N802
    return convert_cpu_kernels(nn.Linear(*args, **kwargs))


def Dropout(*args, **kwargs) -> nn.Module:  # noqa: N802
    return convert_cpu_kernels(nn.Dropout(*args, **kwargs))


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
    assert conv.kernel == "torch"
    x = torch.randn(2, 16, 9, requires_grad=True)
    before = torch.backends.mkldnn.enabled
    conv(x).sum().backward()
    assert torch.backends.mkldnn.enabled == before


def test_grouped_conv_bfloat16_takes_the_plain_path():
    torch.manual_seed(1)
    conv = GroupedConv1d(16, 16, 5, padding=2, groups=4).bfloat16()
    x = torch.randn(2, 16, 9).bfloat16()
    torch.testing.assert_close(conv(x), nn.functional.conv1d(x, conv.weight, conv.bias, padding=2, groups=4))


@pytest.mark.parametrize(("p", "shape"), [(0.1, (400, 500)), (0.5, (3, 7, 1001)), (2.0**-11, (1000, 2001)),
                                          (1.0 - 2.0**-11, (1000, 2001))])
def test_dropout_keeps_one_minus_p_and_scales_the_kept_values(p, shape):
    # p = 0.1 and 0.5 take the 16-bit mask (any element count, here also one not divisible by
    # 4), 2^-11 the float32 one; the share kept is binomial: within 5 sigma of 1 - p.
    torch.manual_seed(0)
    drop = Dropout(p).train()
    x = torch.rand(shape) + 0.5  # no zeros of its own
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
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))  # as nn.Dropout(1.0)


def _linear_step(module: nn.Module, base: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    x = base.clone().requires_grad_(True)
    y = module(x)
    (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
    return y.detach(), [x.grad, module.weight.grad, module.bias.grad]


@pytest.mark.parametrize(("shape", "out"), [((2, 400, 64), 96), ((1200, 48), 32), ((3, 257, 16), 80)])
def test_linear_equals_nn_linear_forward_and_backward(shape, out):
    torch.manual_seed(0)
    ref = nn.Linear(shape[-1], out)
    lin = Linear(shape[-1], out)
    lin.load_state_dict(ref.state_dict())
    assert list(lin.state_dict()) == list(ref.state_dict())
    base = torch.randn(shape)
    base_t = base.transpose(0, 1) if len(shape) == 3 else base  # strided input too
    for x in (base, base_t):
        y_ref, g_ref = _linear_step(ref, x)
        ref.zero_grad()
        y, g = _linear_step(lin, x)
        lin.zero_grad()
        torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
        for mine, theirs in zip(g, g_ref, strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(onednn_linear_kernel() is None, reason="oneDNN's linear kernel: x86-64 torch builds only")
def test_linear_takes_onednn_above_the_row_threshold_only():
    torch.manual_seed(2)
    lin = Linear(32, 16)
    small = torch.randn(ONEDNN_MIN_ROWS - 1, 32)
    assert torch.equal(lin(small), nn.functional.linear(small, lin.weight, lin.bias))  # the same kernel
    big = torch.randn(4 * ONEDNN_MIN_ROWS, 32, requires_grad=True)
    assert lin(big).grad_fn.name().endswith("_OneDNNLinearBackward")
    lin.kernel = "mkl"
    assert lin(big).grad_fn.name() == "AddmmBackward0"
    assert torch.equal(lin(big), nn.functional.linear(big, lin.weight, lin.bias))
    revert_cpu_kernels(lin)
    assert type(lin) is nn.Linear and "kernel" not in vars(lin)
    assert lin(big).grad_fn.name() == "AddmmBackward0"


def test_linear_bfloat16_and_frozen_weights_take_their_paths():
    torch.manual_seed(3)
    lin = Linear(32, 16).bfloat16()
    x = torch.randn(2 * ONEDNN_MIN_ROWS, 32).bfloat16()
    assert torch.equal(lin(x), nn.functional.linear(x, lin.weight, lin.bias))
    frozen = Linear(32, 16).requires_grad_(False)
    x = torch.randn(2 * ONEDNN_MIN_ROWS, 32, requires_grad=True)
    frozen(x).sum().backward()  # only the input's gradient is asked for
    torch.testing.assert_close(x.grad, frozen.weight.sum(0).expand_as(x), rtol=1e-5, atol=1e-5)


def test_linear_without_gradients_equals_the_training_forward():
    torch.manual_seed(4)
    lin = Linear(48, 40)
    x = torch.randn(3, 300, 48)
    with torch.inference_mode():
        inferred = lin(x)
    torch.testing.assert_close(inferred, lin(x).detach(), rtol=0, atol=0)  # the same kernel either way
    torch.testing.assert_close(inferred, nn.functional.linear(x, lin.weight, lin.bias), rtol=1e-5, atol=1e-5)
