"""Two layers whose default eager CPU kernels are slow, with a faster CPU path of the same math.

Shape legend: b batch, c channels, n frames.

Measured on the peer benchmark's step (``tools/bench_peer.py``, one thread, dim 256,
8 x 400 frames; see docs/performance.md):

- `Dropout`: ``nn.Dropout`` on the CPU draws its keep mask with ``bernoulli_``, one
  double-precision uniform per element (7 ms for 1.6M elements). This one draws a float32
  uniform per element (``torch.rand``, 3 ms) and keeps it where it is below ``1 - p``; the
  kept values are scaled by ``1 / (1 - p)`` as in ``nn.Dropout``. The keep probability is
  ``1 - p`` to 2^-24 (float32 uniforms), as with CUDA's fused dropout.
- `GroupedConv1d`: a grouped ``nn.Conv1d`` (the position embedding's 16 groups, kernel 31)
  runs through oneDNN on the CPU, whose backward pass is about twice as slow for these
  shapes as torch's own per-group im2col + GEMM kernel (60 against 33 ms forward +
  backward). This one calls torch's own kernel on the CPU, for the forward and the
  backward pass, and is ``nn.Conv1d`` everywhere else.

Both are subclasses of the ``nn`` modules they replace, so parameter names, state dicts and
checkpoints are unchanged; on CUDA, under autocast and in other dtypes they are the ``nn``
module.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.autograd.function import once_differentiable

__all__ = ["Dropout", "GroupedConv1d"]


class Dropout(nn.Dropout):
    """``nn.Dropout`` (same ``p``, scaling and default generator) whose CPU keep mask comes
    from float32 uniforms, about twice as fast to draw as ``bernoulli_``. ``x [...]`` in and out."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or self.inplace or x.device.type != "cpu":
            return super().forward(x)
        keep = 1.0 - self.p
        noise = torch.rand(x.shape, dtype=torch.float32, device=x.device)
        noise.lt_(keep).div_(keep)  # 1 / (1 - p) where kept, 0 where dropped
        return x * noise.to(x.dtype)


@contextmanager
def _torch_conv_kernels() -> Iterator[None]:
    """Route convolutions to torch's own CPU kernels instead of oneDNN while inside.

    The switch is process-wide; the only other thread a training run has (the batch
    prefetcher) runs no convolution."""
    before = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = before


class _TorchKernelConv1d(torch.autograd.Function):
    """A stride-1 convolution whose forward and backward passes both run torch's own CPU kernels."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        padding: int,
        groups: int,
    ) -> torch.Tensor:
        with _torch_conv_kernels():
            y = torch.ops.aten.convolution(x, weight, bias, [1], [padding], [1], False, [0], groups)
        ctx.save_for_backward(x, weight)
        ctx.padding, ctx.groups, ctx.has_bias = padding, groups, bias is not None
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> tuple:
        x, weight = ctx.saved_tensors
        wants = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.has_bias and ctx.needs_input_grad[2]]
        with _torch_conv_kernels():
            gx, gw, gb = torch.ops.aten.convolution_backward(
                grad.contiguous(), x, weight, [weight.shape[0]] if ctx.has_bias else None,
                [1], [ctx.padding], [1], False, [0], ctx.groups, wants,
            )
        return gx, gw, gb, None, None


class GroupedConv1d(nn.Conv1d):
    """``nn.Conv1d`` (stride 1, integer padding, zero padding mode) that runs torch's own
    per-group kernel instead of oneDNN for float32 CPU tensors, where it is faster for
    grouped convolutions with long kernels. ``x [b c n]`` -> ``[b c_out n']``."""

    def _conv_forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        plain = (
            x.device.type != "cpu"
            or x.dtype != torch.float32
            or weight.dtype != torch.float32
            or torch.is_autocast_enabled("cpu")
            or self.stride != (1,)
            or self.dilation != (1,)
            or self.padding_mode != "zeros"
            or isinstance(self.padding, str)
        )
        if plain:
            return super()._conv_forward(x, weight, bias)
        return _TorchKernelConv1d.apply(x, weight, bias, self.padding[0], self.groups)
