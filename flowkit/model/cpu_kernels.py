"""Three layers whose default eager CPU kernels are slow, with a faster CPU path of the same math.

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
  backward pass, and is ``nn.Conv1d`` everywhere else; the sampler, which needs no backward
  pass, takes oneDNN's forward (`GroupedConv1d.forward_without_grad`), the faster one.

- `Linear`: ``nn.Linear`` on the CPU multiplies with MKL's SGEMM, which on this AMD EPYC
  (Zen 5) runs at about 220 GFLOPS on 2 threads; oneDNN's matmul, which ships inside every
  x86 torch build, runs the same float32 products at 470-490 GFLOPS (MKL dispatches its
  fastest code paths on Intel processors only). This one runs the forward product and both
  backward products through oneDNN (``torch.ops.mkldnn._linear_pointwise``, the kernel
  torch's own CPU inductor backend calls for linear layers): 0.57-0.65x the time of
  ``nn.Linear``'s forward + backward for the DiT's layers at 3,200 frames, outputs and
  gradients equal to 1.2e-6 relative. Products of fewer than `ONEDNN_MIN_ROWS` rows (the
  adaLN modulations, one row an item) stay on ``F.linear``, where oneDNN's set-up costs
  more than it saves. x86-64 only (measured there).

All are subclasses of the ``nn`` modules they replace, so parameter names, state dicts and
checkpoints are unchanged; on CUDA, under autocast and in other dtypes they are the ``nn``
module. `reference_kernels` switches the faster paths off (to count FLOPs with
``torch.utils.flop_counter``, or to compare against torch's own kernels).
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

__all__ = ["ONEDNN_MIN_ROWS", "Dropout", "GroupedConv1d", "Linear", "linear", "reference_kernels"]

ONEDNN_MIN_ROWS = 512
"""`Linear` multiplies through oneDNN from this many rows (frames or characters) up."""

_faster_paths = True


@contextmanager
def reference_kernels() -> Iterator[None]:
    """Run every layer of this module on torch's own ``nn`` code path while inside
    (process-wide)."""
    global _faster_paths
    before, _faster_paths = _faster_paths, False
    try:
        yield
    finally:
        _faster_paths = before


def _float32_cpu(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether a layer's faster path applies: float32 CPU input and weight outside autocast,
    with `reference_kernels` not in force."""
    return (
        _faster_paths
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
    )


class Dropout(nn.Dropout):
    """``nn.Dropout`` (same ``p``, scaling and default generator) whose CPU keep mask comes
    from float32 uniforms, about twice as fast to draw as ``bernoulli_``. ``x [...]`` in and out."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or self.inplace or x.device.type != "cpu" or not _faster_paths:
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
            not _float32_cpu(x, weight)
            or self.stride != (1,)
            or self.dilation != (1,)
            or self.padding_mode != "zeros"
            or isinstance(self.padding, str)
        )
        if plain:
            return super()._conv_forward(x, weight, bias)
        return _TorchKernelConv1d.apply(x, weight, bias, self.padding[0], self.groups)

    def forward_without_grad(self, x: torch.Tensor) -> torch.Tensor:
        """The forward pass alone, through ``nn.Conv1d``'s own kernel choice (oneDNN on the
        CPU), for inference: oneDNN's forward is the faster one here (at the sampler's
        16 x 256 x 400 with 16 groups and kernel 31, 221 against 757 ms, alternated on 2
        loaded cores of an Intel Xeon), while its backward pass is the slower. ``x [b c n]`` -> ``[b c_out n']``.

        Raises:
            RuntimeError: called with gradients enabled (the training forward is `forward`).
        """
        if torch.is_grad_enabled():
            raise RuntimeError("GroupedConv1d.forward_without_grad needs torch.no_grad(); train through forward")
        return super()._conv_forward(x, self.weight, self.bias)


def _onednn_linear_kernel() -> Any:
    """``torch.ops.mkldnn._linear_pointwise`` on an x86-64 CPU whose torch build has it and
    where it computes ``F.linear`` (a private op: checked once on a small product), else None
    (measured on x86 only; on ARM torch's own kernels are oneDNN's already)."""
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


_ONEDNN_LINEAR = _onednn_linear_kernel()


def _onednn_mm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x [m k] @ weight [n k]^T (+ bias [n])`` -> ``[m n]`` through oneDNN."""
    return _ONEDNN_LINEAR(x, weight, bias, "none", [], "")


class _OneDNNLinear(torch.autograd.Function):
    """``x @ weight^T + bias`` whose forward and backward products all run through oneDNN."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
    ) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        ctx.save_for_backward(rows, weight)
        ctx.in_shape, ctx.has_bias = x.shape, bias is not None
        return _onednn_mm(rows, weight, bias).view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    @once_differentiable
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> tuple:
        rows, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1]).contiguous()  # [m n]
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:  # g @ weight: [m n] @ [n k]
            gx = _onednn_mm(g, weight.t().contiguous()).view(ctx.in_shape)
        if ctx.needs_input_grad[1]:  # (rows^T @ g)^T: [k m] @ [m n], then [n k]
            gw = _onednn_mm(rows.t().contiguous(), g.t()).t().contiguous()
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum(0)
        return gx, gw, gb


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear`` by `Linear`'s rule: ``x [... in] @ weight [out in]^T (+ bias [out])`` ->
    ``[... out]``, through oneDNN for float32 CPU products of at least `ONEDNN_MIN_ROWS` rows."""
    plain = (
        _ONEDNN_LINEAR is None
        or not _float32_cpu(x, weight)
        or x.numel() < ONEDNN_MIN_ROWS * weight.shape[1]
        or torch.compiler.is_compiling()
    )
    if plain:
        return F.linear(x, weight, bias)
    if not torch.is_grad_enabled():  # inference: nothing to save for a backward pass
        return _onednn_mm(x.reshape(-1, x.shape[-1]), weight, bias).view(*x.shape[:-1], -1)
    return _OneDNNLinear.apply(x, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` whose float32 CPU products of at least `ONEDNN_MIN_ROWS` rows run
    through oneDNN instead of MKL, forward and backward (`linear`). ``x [... in]`` -> ``[... out]``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
