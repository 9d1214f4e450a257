"""CPU layers that compute what ``nn.Linear``, ``nn.Dropout`` and a grouped ``nn.Conv1d``
compute, through kernels that are faster on x86 CPUs, and the functions they call.

Shape legend: b batch, c channels, n frames, k input features, m rows.

`flowkit.converters.cpu` swaps a built model's layers for these classes in place (each is a
subclass of the ``nn`` module it replaces: parameters, state-dict names and hooks stay). A
layer's kernel is an attribute of that layer, set by the converter; nothing here is
process-wide. For tensors that are not float32 on the CPU, or under autocast, each layer
is its ``nn`` parent. Measurements of each kernel are in docs/performance.md.

- `CpuLinear`: the forward product and both backward products through oneDNN's matmul
  (``torch.ops.mkldnn._linear_pointwise``, the kernel torch's CPU inductor backend calls for
  linear layers) instead of ``F.linear`` (MKL's SGEMM on x86), for products of at least
  ``onednn_min_rows`` rows; equal to ``nn.Linear`` to float32 rounding (another summation
  order).
- `CpuDropout`: the keep mask from 16-bit uniforms, four to one 64-bit draw of torch's CPU
  generator, instead of ``bernoulli_``'s one double-precision draw per element: the keep
  probability is ``1 - p`` to 2^-17 (float32 uniforms where ``p`` lies within
  `DROPOUT_MIN_P_16BIT` of 0 or 1). Another random stream than ``nn.Dropout``'s, with the
  same distribution and scaling.
- `CpuGroupedConv1d`: with gradients, torch's own per-group im2col + GEMM kernel (forward and
  backward, ``torch``), oneDNN in the channels-last layout (`channels_last_conv1d`) or
  ``nn.Conv1d``'s own path (``onednn``); under ``torch.no_grad()``, oneDNN in either layout.
"""

from __future__ import annotations

import functools
import platform
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

__all__ = [
    "DROPOUT_MIN_P_16BIT", "ONEDNN_MIN_ROWS", "CpuDropout", "CpuGroupedConv1d", "CpuLinear", "channels_last_conv1d",
    "onednn_linear_kernel", "onednn_mm", "torch_grouped_conv1d",
]

ONEDNN_MIN_ROWS = 512
"""`CpuLinear` multiplies through oneDNN from this many rows (frames or characters) up: below
it (the adaLN modulations, one row an item) oneDNN's set-up costs more than it saves."""

#: below this dropout probability, or above 1 minus it, `CpuDropout` draws float32 uniforms:
#: 16-bit uniforms resolve ``p`` and ``1 - p`` to 2^-17, a relative error over 0.8 % there.
DROPOUT_MIN_P_16BIT = 2.0**-10


def _float32_cpu(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether a layer's CPU kernel applies: float32 CPU input and weight outside autocast."""
    return (
        x.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
    )


@functools.cache
def onednn_linear_kernel() -> Any:
    """``torch.ops.mkldnn._linear_pointwise`` on an x86-64 CPU whose torch build has it and
    where it computes ``F.linear`` (a private op: checked once, on first use, on a small
    product), else None (on ARM torch's own kernels are oneDNN's already)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
        return None
    kernel = getattr(torch.ops.mkldnn, "_linear_pointwise", None)
    if kernel is None:
        return None
    x = torch.linspace(-1.0, 1.0, 64 * 6).view(64, 6)
    weight, bias = torch.linspace(-0.5, 0.5, 18).view(3, 6), torch.tensor([0.1, -0.2, 0.3])
    try:
        ok = torch.allclose(kernel(x, weight, bias, "none", [], ""), F.linear(x, weight, bias), atol=1e-5)
    except (RuntimeError, TypeError):  # another signature in another torch release
        return None
    return kernel if ok else None


def onednn_mm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x [m k] @ weight [n k]^T (+ bias [n])`` -> ``[m n]`` through oneDNN (`onednn_linear_kernel`
    must not be None)."""
    return onednn_linear_kernel()(x, weight, bias, "none", [], "")


class _OneDNNLinear(torch.autograd.Function):
    """``x @ weight^T + bias`` whose forward and backward products all run through oneDNN."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None
    ) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        ctx.save_for_backward(rows, weight)
        ctx.in_shape, ctx.has_bias = x.shape, bias is not None
        return onednn_mm(rows, weight, bias).view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> tuple:
        rows, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1]).contiguous()  # [m n]
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:  # g @ weight: [m n] @ [n k]
            gx = onednn_mm(g, weight.t().contiguous()).view(ctx.in_shape)
        if ctx.needs_input_grad[1]:  # (rows^T @ g)^T: [k m] @ [m n], then [n k]
            gw = onednn_mm(rows.t().contiguous(), g.t()).t().contiguous()
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum(0)
        return gx, gw, gb


def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x [... k] @ weight [n k]^T (+ bias [n])`` -> ``[... n]`` through oneDNN, forward and,
    with gradients enabled, backward."""
    if not torch.is_grad_enabled():  # inference: nothing to save for a backward pass
        return onednn_mm(x.reshape(-1, x.shape[-1]), weight, bias).view(*x.shape[:-1], -1)
    return _OneDNNLinear.apply(x, weight, bias)


class CpuLinear(nn.Linear):
    """``nn.Linear`` whose float32 CPU products of at least ``onednn_min_rows`` rows run through
    oneDNN while ``kernel`` is ``"onednn"`` (``"mkl"``: ``F.linear``). ``x [... in]`` -> ``[... out]``.

    Attributes (set by `flowkit.converters.cpu.convert_cpu_kernels`):
        kernel: ``"mkl"`` or ``"onednn"``.
        onednn_min_rows: the rows from which oneDNN multiplies.
    """

    kernel: str
    onednn_min_rows: int

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        plain = (
            self.kernel != "onednn"
            or onednn_linear_kernel() is None
            or not _float32_cpu(x, self.weight)
            or x.numel() < self.onednn_min_rows * self.in_features
            or torch.compiler.is_compiling()
        )
        if plain:
            return F.linear(x, self.weight, self.bias)
        return onednn_linear(x, self.weight, self.bias)


class CpuDropout(nn.Dropout):
    """``nn.Dropout`` (same ``p``, scaling and default generator) whose CPU keep mask comes from
    16-bit uniforms, four to a 64-bit draw. ``x [...]`` in and out."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or self.inplace or x.device.type != "cpu":
            return super().forward(x)
        keep = 1.0 - self.p
        if keep == 0.0:
            return x * 0.0  # nn.Dropout(1.0): every element dropped
        # 16 bits would round p or 1 - p too coarsely
        if not DROPOUT_MIN_P_16BIT <= self.p <= 1.0 - DROPOUT_MIN_P_16BIT:
            noise = torch.rand(x.shape, dtype=torch.float32, device=x.device)
            noise.lt_(keep).div_(keep)  # 1 / (1 - p) where kept, 0 where dropped
            return x * noise.to(x.dtype)
        n = x.numel()
        bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), 2**63 - 1)
        lanes = bits.view(torch.int16)[:n].view(x.shape)  # uniform on [-2^15, 2^15)
        noise = lanes.lt(round(keep * 65536) - 32768).to(x.dtype).div_(keep)
        return x * noise


def _group_slices(channels: int, groups: int) -> list[slice]:
    per = channels // groups
    return [slice(i * per, (i + 1) * per) for i in range(groups)]


def _torch_conv_forward(x4: torch.Tensor, w4: torch.Tensor, bias: torch.Tensor | None, padding: int,
                        groups: int) -> torch.Tensor:
    """``x4 [b c 1 n]`` convolved group by group with torch's own CPU kernel (im2col + GEMM,
    what ``conv1d`` runs where oneDNN is not used) -> ``[b c_out 1 n']``."""
    ins, outs = _group_slices(x4.shape[1], groups), _group_slices(w4.shape[0], groups)
    kernel = [1, w4.shape[3]]
    return torch.cat([
        torch.ops.aten._slow_conv2d_forward(x4[:, i].contiguous(), w4[o].contiguous(), kernel,
                                            None if bias is None else bias[o].contiguous(), [1, 1], [0, padding])
        for i, o in zip(ins, outs, strict=True)
    ], dim=1)


class _TorchKernelConv1d(torch.autograd.Function):
    """A stride-1 grouped convolution whose forward and backward passes both run torch's own CPU kernel."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor | None, padding: int, groups: int) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.padding, ctx.groups, ctx.has_bias = padding, groups, bias is not None
        return _torch_conv_forward(x.unsqueeze(2), weight.unsqueeze(2), bias, padding, groups).squeeze(2)

    @staticmethod
    @once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> tuple:
        x, weight = ctx.saved_tensors
        x4, w4, g4 = x.unsqueeze(2), weight.unsqueeze(2), grad.unsqueeze(2)
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.has_bias and ctx.needs_input_grad[2]]
        parts: list[list[torch.Tensor | None]] = [[], [], []]
        ins, outs = _group_slices(x.shape[1], ctx.groups), _group_slices(weight.shape[0], ctx.groups)
        for i, o in zip(ins, outs, strict=True):
            grads = torch.ops.aten._slow_conv2d_backward(
                g4[:, o].contiguous(), x4[:, i].contiguous(), w4[o].contiguous(), [1, weight.shape[2]],
                [1, 1], [0, ctx.padding], mask,
            )
            for part, g in zip(parts, grads, strict=True):
                part.append(g)
        gx = torch.cat(parts[0], dim=1).squeeze(2) if mask[0] else None
        gw = torch.cat(parts[1], dim=0).squeeze(2) if mask[1] else None
        gb = torch.cat(parts[2]) if mask[2] else None
        return gx, gw, gb, None, None


def torch_grouped_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int,
                         groups: int) -> torch.Tensor:
    """A stride-1 ``conv1d`` ``x [b c n]`` -> ``[b c_out n']`` whose forward and backward passes
    run torch's own per-group CPU kernel, never oneDNN."""
    return _TorchKernelConv1d.apply(x, weight, bias, padding, groups)


def channels_last_conv1d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int, groups: int
) -> torch.Tensor:
    """A stride-1 ``conv1d`` through oneDNN in the channels-last layout: ``x [b c n]`` whose
    memory is frames-major (``x = h.transpose(1, 2)`` of an activation ``h [b n c]``; any other
    layout is copied into it) -> ``[b c_out n']``, again a frames-major view, so the caller's
    ``.transpose(1, 2)`` back to ``[b n' c_out]`` is free.

    As a 2-D convolution of height 1 in ``torch.channels_last`` memory format, oneDNN runs its
    channels-last (nhwc) kernel on the activations as they lie, with no reorder of the input
    or the output; ``nn.Conv1d`` on the same view reorders both. Autograd is torch's own
    (oneDNN's backward in the same format).
    """
    x4 = x.unsqueeze(2).contiguous(memory_format=torch.channels_last)  # [b c 1 n], memory [b 1 n c]
    return F.conv2d(x4, weight.unsqueeze(2), bias, padding=(0, padding), groups=groups).squeeze(2)


class CpuGroupedConv1d(nn.Conv1d):
    """``nn.Conv1d`` (stride 1, integer padding, zero padding mode) that runs ``kernel`` with
    gradients enabled and ``inference_kernel`` under ``torch.no_grad()`` for float32 CPU
    tensors. ``x [b c n]`` -> ``[b c_out n']``.

    Attributes (set by `flowkit.converters.cpu.convert_cpu_kernels`):
        kernel: ``"torch"`` (`torch_grouped_conv1d`), ``"onednn"`` (``nn.Conv1d``'s own path) or
            ``"channels_last"`` (`channels_last_conv1d`).
        inference_kernel: ``"onednn"`` or ``"channels_last"``.
    """

    kernel: str
    inference_kernel: str

    def _conv_forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        kernel = self.kernel if torch.is_grad_enabled() else self.inference_kernel
        if kernel == "onednn" or not _float32_cpu(x, weight) or not self._plain_geometry():
            return super()._conv_forward(x, weight, bias)
        if kernel == "channels_last":
            return channels_last_conv1d(x, weight, bias, self.padding[0], self.groups)
        return torch_grouped_conv1d(x, weight, bias, self.padding[0], self.groups)

    def _plain_geometry(self) -> bool:
        """Stride 1, no dilation, integer zero padding: what the CPU kernels compute."""
        return (
            self.stride == (1,) and self.dilation == (1,) and self.padding_mode == "zeros"
            and not isinstance(self.padding, str)
        )
