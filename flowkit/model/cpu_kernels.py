"""Three layers whose default eager CPU kernels are slow, with a faster CPU path of the same math.

Shape legend: b batch, c channels, n frames.

Measured on the peer benchmark's step (``tools/bench_peer.py``, one thread, dim 256,
8 x 400 frames; see docs/performance.md):

- `Dropout`: ``nn.Dropout`` on the CPU draws its keep mask with ``bernoulli_``, one
  double-precision uniform per element (13.3 ms for 1.6M elements on an idle Intel Xeon, 2
  threads). torch's CPU generator (Mersenne Twister) draws serially, one draw per element
  whatever the dtype (``torch.rand`` float32: 8.7 ms), so this one draws a quarter as many
  64-bit integers over 2^64 - 1 values (2.4 ms; a bias of 2^-64) and reads each as four
  16-bit uniforms: an element is
  kept where its 16 bits fall below ``(1 - p) * 2^16``. The kept values are scaled by
  ``1 / (1 - p)`` as in ``nn.Dropout``; the keep probability is ``1 - p`` to 2^-17 (for
  ``p`` within `DROPOUT_MIN_P_16BIT` of 0 or 1, float32 uniforms, to 2^-24). The whole dropout: 4.3
  against 7.6 ms with float32 uniforms.
- `GroupedConv1d`: a grouped ``nn.Conv1d`` (the position embedding's 16 groups, kernel 31)
  runs through oneDNN on the CPU, whose backward pass is about twice as slow for these
  shapes as torch's own per-group im2col + GEMM kernel (60 against 33 ms forward +
  backward). This one calls torch's own kernel on the CPU, for the forward and the
  backward pass, or oneDNN in the channels-last layout (`channels_last_conv1d`: the
  activations' own frames-major memory, no reorder), whichever is measured faster, and is
  ``nn.Conv1d`` everywhere else. On a Zen 3 EPYC the channels-last kernel takes 0.41-0.59x
  the forward + backward time of torch's (a training step 7-9 % less); the sampler, which
  needs no backward pass, takes the faster of oneDNN's two forwards
  (`GroupedConv1d.forward_without_grad`: 0.36-0.43x channels-last against channels-first there).

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

Which kernel is faster depends on the CPU (on that AMD EPYC oneDNN's matmul is twice
MKL's speed; on an Intel Xeon MKL is as fast), so the linear and grouped-convolution kernels
are chosen by measurement, once per process and per set of layer shapes
(`choose_cpu_kernels`, which ``flowkit train`` calls before its first step and prints in one
``cpu kernels: ...`` line): each candidate runs the forward and backward pass of the model's
own layers at `MEASURE_ROWS` rows, alternated, and the faster (median) is used from then on,
unless the default is within `MEASURE_MARGIN` of it (a tie keeps the default).
Models with fewer than `MEASURE_MIN_WEIGHTS` linear weights keep `DEFAULT_KERNELS` unmeasured
(their products are too small for the choice to matter, and an unmeasured choice is the same
in every process). The environment variables ``FLOWKIT_CPU_LINEAR`` (``auto``, ``mkl``,
``onednn``) and ``FLOWKIT_CPU_GROUPED_CONV`` (``auto``, ``torch``, ``onednn``, ``channels_last``)
fix a choice.

The two kernels of a family compute the same products in another order, so their results
differ in the last bits: a run records its choice in each checkpoint's meta
(`KernelChoice.record`) and a resumed run re-uses the recorded choice whatever the
measurement or the environment says, so it trains the same bits as a run that never
stopped. A checkpoint without a record ran `DEFAULT_KERNELS` (what flowkit used before the
choice was measured).

Sampling (``flowkit synthesize``, ``flowkit eval``) runs forward passes only, of fewer rows
(batch 1 with classifier-free guidance: twice the utterance's frames), and the kernel that
wins a training step's forward + backward need not win a forward pass: `sampling_kernels`
measures the forward products alone at `SAMPLING_MEASURE_ROWS` rows and, where oneDNN wins
clearly, lets it take products from `SAMPLING_MIN_ROWS` rows while inside. An eval records its choice and a
continued eval re-uses it, so its remaining utterances are the bits an unbroken eval makes.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from flowkit.errors import ConfigError

__all__ = [
    "DEFAULT_KERNELS", "KERNEL_ENV", "KERNELS", "MEASURE_MARGIN", "MEASURE_MIN_WEIGHTS", "MEASURE_ROWS", "ONEDNN_MIN_ROWS",
    "SAMPLING_DEFAULT_KERNELS", "SAMPLING_MEASURE_ROWS", "SAMPLING_MIN_ROWS", "DROPOUT_MIN_P_16BIT", "Dropout", "GroupedConv1d", "KernelChoice",
    "Linear", "channels_last_conv1d", "choose_cpu_kernels", "current_kernels", "linear", "reference_kernels", "sampling_kernels", "use_kernels",
]

ONEDNN_MIN_ROWS = 512
"""`Linear` multiplies through oneDNN from this many rows (frames or characters) up."""

SAMPLING_MIN_ROWS = 128
"""The same threshold inside `sampling_kernels`: with no backward pass to amortise its set-up,
oneDNN's forward product pays from fewer rows where it is the faster kernel at all."""

SAMPLING_MEASURE_ROWS = 256
"""Rows of the forward products `sampling_kernels` times: a short utterance's frames at batch 1,
in the range where the two kernels differ most."""

_onednn_min_rows = ONEDNN_MIN_ROWS  # ONEDNN_MIN_ROWS, or SAMPLING_MIN_ROWS inside sampling_kernels

_faster_paths = True

KERNELS: dict[str, tuple[str, ...]] = {
    "linear": ("mkl", "onednn"), "grouped_conv": ("torch", "onednn", "channels_last"),
}
"""Each family's candidate kernels: ``linear``: ``mkl`` (``F.linear``: MKL's SGEMM on x86) or
``onednn`` (`_OneDNNLinear`); ``grouped_conv``: ``torch`` (`_TorchKernelConv1d`), ``onednn``
(``nn.Conv1d``'s own CPU path) or ``channels_last`` (`channels_last_conv1d`: oneDNN in the
frames-major layout the model keeps its activations in)."""

SAMPLING_DEFAULT_KERNELS: dict[str, str] = {"linear": "onednn", "grouped_conv": "onednn"}
"""The kernels `sampling_kernels` keeps on a tie: ``grouped_conv=onednn`` is oneDNN's forward
in the channels-first layout (`GroupedConv1d.forward_without_grad` before it measured)."""

DEFAULT_KERNELS: dict[str, str] = {"linear": "onednn", "grouped_conv": "torch"}
"""The kernels in force until a choice is made, and those of a checkpoint that records none."""

KERNEL_ENV: dict[str, str] = {"linear": "FLOWKIT_CPU_LINEAR", "grouped_conv": "FLOWKIT_CPU_GROUPED_CONV"}
"""The environment variable that fixes each family's kernel (``auto``: measure)."""

MEASURE_ROWS = 512
"""Rows (frames) of the products `choose_cpu_kernels` times: above `ONEDNN_MIN_ROWS`, small
enough that the measurement of a 4.5M-parameter model takes well under a second."""

MEASURE_MIN_WEIGHTS = 1_000_000
"""Linear weights a model needs for its kernels to be measured (the ``tiny`` preset has
0.17M, ``small`` 4.2M)."""

MEASURE_MARGIN = 0.10
"""A measured kernel replaces the family's default only when it takes at least this share
less time: two kernels within it are a tie that the load of the moment could decide either
way, and two fresh runs of one config on one machine should train with the same kernels."""

_kernels: dict[str, str] = dict(DEFAULT_KERNELS)
_measured: dict[tuple, dict[str, float]] = {}  # per process: (family, shapes, rows, threads) -> {kernel: ms}


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


#: below this dropout probability, or above 1 minus it, `Dropout` draws float32 uniforms:
#: 16-bit uniforms resolve ``p`` and ``1 - p`` to 2^-17, a relative error over 0.8 % there.
DROPOUT_MIN_P_16BIT = 2.0**-10


class Dropout(nn.Dropout):
    """``nn.Dropout`` (same ``p``, scaling and default generator) whose CPU keep mask comes
    from 16-bit uniforms, four to a 64-bit draw: 0.56x the time of a mask from float32
    uniforms, 0.32x of ``bernoulli_``'s. ``x [...]`` in and out."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or self.inplace or x.device.type != "cpu" or not _faster_paths:
            return super().forward(x)
        keep = 1.0 - self.p
        if keep == 0.0:
            return x * 0.0  # nn.Dropout(1.0): every element dropped
        if not DROPOUT_MIN_P_16BIT <= self.p <= 1.0 - DROPOUT_MIN_P_16BIT:  # 16 bits would round p or 1 - p too coarsely
            noise = torch.rand(x.shape, dtype=torch.float32, device=x.device)
            noise.lt_(keep).div_(keep)  # 1 / (1 - p) where kept, 0 where dropped
            return x * noise.to(x.dtype)
        n = x.numel()
        bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), 2**63 - 1)
        lanes = bits.view(torch.int16)[:n].view(x.shape)  # uniform on [-2^15, 2^15)
        noise = lanes.lt(round(keep * 65536) - 32768).to(x.dtype).div_(keep)
        return x * noise


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


def channels_last_conv1d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, padding: int, groups: int
) -> torch.Tensor:
    """A stride-1 ``conv1d`` through oneDNN in the channels-last layout: ``x [b c n]`` whose
    memory is frames-major (``x = h.transpose(1, 2)`` of an activation ``h [b n c]``; any other
    layout is copied into it) -> ``[b c_out n']``, again a frames-major view, so the caller's
    ``.transpose(1, 2)`` back to ``[b n' c_out]`` is free.

    As a 2-D convolution of height 1 in ``torch.channels_last`` memory format, oneDNN runs its
    channels-last (nhwc) kernel on the activations as they lie, with no reorder of the input
    or the output; ``nn.Conv1d`` on the same view reorders both. For the position embedding's
    16 groups and kernel 31 on a Zen 3 EPYC (2 threads): forward 1.1 against 2.6 ms at
    2 x 256 x 250, forward + backward 22 against 38 ms (torch's kernel) at 8 x 256 x 400.
    Autograd is torch's own (oneDNN's backward in the same format).
    """
    x4 = x.unsqueeze(2).contiguous(memory_format=torch.channels_last)  # [b c 1 n], memory [b 1 n c]
    return F.conv2d(x4, weight.unsqueeze(2), bias, padding=(0, padding), groups=groups).squeeze(2)


class GroupedConv1d(nn.Conv1d):
    """``nn.Conv1d`` (stride 1, integer padding, zero padding mode) that runs the grouped
    convolution kernel in force (`current_kernels`) for float32 CPU tensors: torch's own
    per-group kernel (the default), oneDNN in the channels-last layout
    (`channels_last_conv1d`), or ``nn.Conv1d``'s own path (``onednn``). ``x [b c n]`` -> ``[b c_out n']``."""

    def _conv_forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        plain = _kernels["grouped_conv"] == "onednn" or not _float32_cpu(x, weight) or not self._plain_geometry()
        if plain:
            return super()._conv_forward(x, weight, bias)
        if _kernels["grouped_conv"] == "channels_last":
            return channels_last_conv1d(x, weight, bias, self.padding[0], self.groups)
        return _TorchKernelConv1d.apply(x, weight, bias, self.padding[0], self.groups)

    def forward_without_grad(self, x: torch.Tensor) -> torch.Tensor:
        """The forward pass alone, for inference, through oneDNN: in the channels-last layout
        (`channels_last_conv1d`) where that kernel is in force (`sampling_kernels` measures
        it), else ``nn.Conv1d``'s own kernel choice (oneDNN on the CPU; its forward beats
        torch's own kernel: at the sampler's 16 x 256 x 400 with 16 groups and kernel 31, 221
        against 757 ms, alternated on 2 loaded cores of an Intel Xeon). ``x [b c n]`` -> ``[b c_out n']``.

        Raises:
            RuntimeError: called with gradients enabled (the training forward is `forward`).
        """
        if torch.is_grad_enabled():
            raise RuntimeError("GroupedConv1d.forward_without_grad needs torch.no_grad(); train through forward")
        if _kernels["grouped_conv"] == "channels_last" and _float32_cpu(x, self.weight) and self._plain_geometry():
            return channels_last_conv1d(x, self.weight, self.bias, self.padding[0], self.groups)
        return super()._conv_forward(x, self.weight, self.bias)

    def _plain_geometry(self) -> bool:
        """Stride 1, no dilation, integer zero padding: what the faster kernels compute."""
        return (
            self.stride == (1,) and self.dilation == (1,) and self.padding_mode == "zeros"
            and not isinstance(self.padding, str)
        )


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
    ``[... out]``, through oneDNN for float32 CPU products of at least `ONEDNN_MIN_ROWS` rows
    (`SAMPLING_MIN_ROWS` inside `sampling_kernels`) while the linear kernel in force is
    ``onednn`` (`current_kernels`)."""
    plain = (
        _ONEDNN_LINEAR is None
        or _kernels["linear"] != "onednn"
        or not _float32_cpu(x, weight)
        or x.numel() < _onednn_min_rows * weight.shape[1]
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


def current_kernels() -> dict[str, str]:
    """The kernel in force per family (``{"linear": ..., "grouped_conv": ...}``, a copy)."""
    return dict(_kernels)


def use_kernels(**choice: str) -> None:
    """Put kernels in force, process-wide: ``use_kernels(linear="mkl")``; families not named
    keep theirs.

    Raises:
        ValueError: an unknown family or kernel.
    """
    for family, kernel in choice.items():
        if kernel not in KERNELS.get(family, ()):
            raise ValueError(f"cpu kernel {family}={kernel!r} is not known; use one of {KERNELS.get(family)}")
    _kernels.update(choice)


@dataclass(frozen=True)
class KernelChoice:
    """The kernels a run uses, how each was chosen and what the measurement found.

    ``kernels``: ``{family: kernel}``; ``how``: ``{family: "measured" | "recorded" |
    "FLOWKIT_CPU_... = ..." | "default (...)"}``; ``ms``: ``{family: {kernel: ms}}``, the
    forward + backward time of the model's layers of that family at `MEASURE_ROWS` rows per
    candidate (empty where nothing was measured).
    """

    kernels: dict[str, str]
    how: dict[str, str]
    ms: dict[str, dict[str, float]] = field(default_factory=dict)
    onednn_min_rows: int | None = None  # sampling_kernels: the rows from which oneDNN multiplies

    def line(self) -> str:
        """One line: ``cpu kernels: linear=mkl (measured: mkl 1.00 ms, onednn 1.12 ms), ...``."""
        parts = []
        for family, kernel in self.kernels.items():
            times = self.ms.get(family)
            detail = self.how[family]
            if times:
                detail += ": " + ", ".join(f"{k} {v:.2f} ms" for k, v in times.items())
            parts.append(f"{family.replace('_', ' ')}={kernel} ({detail})")
        if self.onednn_min_rows is not None and self.kernels.get("linear") == "onednn":
            parts.append(f"oneDNN from {self.onednn_min_rows} rows")
        return "cpu kernels: " + ", ".join(parts)

    def record(self) -> dict[str, Any]:
        """What a checkpoint's meta keeps (JSON): ``{"kernels", "how", "ms"}``."""
        return {"kernels": dict(self.kernels), "how": dict(self.how), "ms": {k: dict(v) for k, v in self.ms.items()}}


def _median_ms(runs: Mapping[str, Callable[[], None]], reps: int) -> dict[str, float]:
    """``{name: median ms}`` of each callable, after one warm-up each, alternating the
    order every repetition so that load from elsewhere falls on all of them."""
    for fn in runs.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for rep in range(reps):
        for name in names if rep % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            runs[name]()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def _forward_only(fn: Callable[..., torch.Tensor], *args: Any) -> Callable[[], None]:
    """A timing run of ``fn(*args)`` without gradients (the sampler's forward pass)."""
    def once() -> None:
        with torch.no_grad():
            fn(*args)
    return once


def _linear_runs(k_in: int, k_out: int, rows: int, backward: bool = True) -> dict[str, Callable[[], None]]:
    """Forward + backward (``backward``; else the forward alone, as the sampler runs it) of
    one ``[rows k_in] -> [rows k_out]`` layer through each linear kernel."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, k_in, generator=g).requires_grad_(backward)
    w = (torch.randn(k_out, k_in, generator=g) / k_in**0.5).requires_grad_(backward)
    b = torch.zeros(k_out).requires_grad_(backward)
    dy = torch.randn(rows, k_out, generator=g)
    if not backward:
        return {"mkl": _forward_only(F.linear, x, w, b), "onednn": _forward_only(_onednn_mm, x, w, b)}

    def run(fn: Callable[..., torch.Tensor]) -> Callable[[], None]:
        def once() -> None:
            x.grad = w.grad = b.grad = None
            fn(x, w, b).backward(dy)
        return once

    return {"mkl": run(F.linear), "onednn": run(_OneDNNLinear.apply)}


def _grouped_conv_runs(conv: nn.Conv1d, rows: int, backward: bool = True) -> dict[str, Callable[[], None]]:
    """Forward + backward (``backward``; else the forward alone, of ``onednn`` and
    ``channels_last``, the sampler's two) of one grouped convolution of ``rows`` frames
    (``[rows // 512 or 1, c, n]``, a frames-major view as the model passes it) through each
    grouped-convolution kernel."""
    frames = min(rows, 512)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(max(1, rows // frames), frames, conv.in_channels, generator=g).transpose(1, 2)
    x.requires_grad_(backward)
    w = conv.weight.detach().clone().requires_grad_(backward)
    b = None if conv.bias is None else conv.bias.detach().clone().requires_grad_(backward)
    pad, groups = int(conv.padding[0]), conv.groups

    def onednn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        return F.conv1d(x, w, b, padding=pad, groups=groups)

    def mine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        return _TorchKernelConv1d.apply(x, w, b, pad, groups)

    def channels_last(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        return channels_last_conv1d(x, w, b, pad, groups)

    if not backward:
        return {"onednn": _forward_only(onednn, x, w, b), "channels_last": _forward_only(channels_last, x, w, b)}

    dy = torch.randn(onednn(x, w, b).shape, generator=g)

    def run(fn: Callable[..., torch.Tensor]) -> Callable[[], None]:
        def once() -> None:
            x.grad = w.grad = None
            if b is not None:
                b.grad = None
            fn(x, w, b).backward(dy)
        return once

    return {"torch": run(mine), "onednn": run(onednn), "channels_last": run(channels_last)}


def _measure(family: str, shapes: dict[tuple, tuple[int, Callable[[], dict[str, Callable[[], None]]]]],
             rows: int, reps: int, backward: bool = True) -> dict[str, float]:
    """``{kernel: ms}``: the sum over ``shapes`` (``{shape: (count, make_runs)}``) of count x
    the median forward + backward (or forward) time, cached per process."""
    key = (family, tuple(sorted((s, c) for s, (c, _) in shapes.items())), rows, torch.get_num_threads(), backward)
    if key not in _measured:
        total: dict[str, float] = {}
        with torch.enable_grad():
            for count, make_runs in shapes.values():
                for kernel, ms in _median_ms(make_runs(), reps).items():
                    total[kernel] = total.get(kernel, 0.0) + count * ms
        _measured[key] = total
    return dict(_measured[key])


def _measured_choice(family: str, ms: Mapping[str, float], defaults: Mapping[str, str] = DEFAULT_KERNELS) -> tuple[str, str]:
    """``(kernel, how)`` from the measured ``{kernel: ms}``: the fastest, unless the family's
    default (in ``defaults``) is within `MEASURE_MARGIN` of it (then the default)."""
    fastest, default = min(ms, key=ms.get), defaults[family]
    if fastest != default and ms[fastest] > (1 - MEASURE_MARGIN) * ms[default]:
        return default, f"measured; within {MEASURE_MARGIN:.0%} of the default, kept"
    return fastest, "measured"


def _from_env(family: str) -> str | None:
    """The kernel the family's environment variable fixes (None: ``auto`` or unset).

    Raises:
        ConfigError: a value that is neither ``auto`` nor one of the family's kernels.
    """
    name = KERNEL_ENV[family]
    value = os.environ.get(name, "auto").strip().lower()
    if value in ("", "auto"):
        return None
    if value not in KERNELS[family]:
        raise ConfigError(f"{name} = {os.environ[name]!r} is not known; use auto, {' or '.join(KERNELS[family])}")
    return value


def choose_cpu_kernels(
    model: nn.Module,
    *,
    recorded: Mapping[str, Any] | None = None,
    resumed: bool = False,
    measure: bool = True,
    rows: int = MEASURE_ROWS,
    reps: int = 3,
    backward: bool = True,
    families: tuple[str, ...] = tuple(KERNELS),
) -> KernelChoice:
    """Choose, put in force (`use_kernels`) and return the CPU kernels for training ``model``
    (``backward``: timed forward + backward; false: the forward alone, `sampling_kernels`) in
    ``families`` (the others keep theirs).

    Per family, in this order: a resumed run's recorded kernel (``recorded``, a checkpoint
    meta's `KernelChoice.record`; a resumed run without one gets `DEFAULT_KERNELS`, what it
    trained with), so a resume trains the same bits; the family's environment variable
    (`KERNEL_ENV`); the default where the model has no layer of the family, fewer than
    `MEASURE_MIN_WEIGHTS` linear weights, or ``measure`` is false (e.g. ranks of one
    distributed run, which must agree); else the faster candidate measured at the model's own
    layer shapes (each distinct shape once, weighted by its count, ``rows`` frames, median of
    ``reps``; cached per process). Without oneDNN's linear kernel (not x86-64) linear is
    ``mkl``.

    Raises:
        ConfigError: an environment variable names an unknown kernel.
    """
    linears: dict[tuple, list] = {}
    convs: dict[tuple, list] = {}
    weights = 0
    for module in model.modules():
        if isinstance(module, Linear):
            shape = (module.in_features, module.out_features)
            linears.setdefault(shape, [0, None])[0] += 1
            weights += module.in_features * module.out_features
        elif isinstance(module, GroupedConv1d):
            shape = (module.in_channels, module.out_channels, module.kernel_size[0], module.groups, module.padding)
            convs.setdefault(shape, [0, module])[0] += 1
    shapes = {
        "linear": {s: (c, lambda s=s: _linear_runs(s[0], s[1], rows, backward)) for s, (c, _) in linears.items()},
        "grouped_conv": {s: (c, lambda m=m: _grouped_conv_runs(m, rows, backward)) for s, (c, m) in convs.items()},
    }
    defaults = DEFAULT_KERNELS if backward else SAMPLING_DEFAULT_KERNELS
    kernels, how, ms = {}, {}, {}
    saved = dict(recorded.get("kernels", {})) if recorded else {}
    for family in families:
        env = _from_env(family)
        if resumed:
            kernel = saved.get(family, DEFAULT_KERNELS[family])
            kernels[family] = kernel
            how[family] = "recorded" if family in saved else "default: the checkpoint records none"
            if env is not None and env != kernel:
                how[family] += f"; {KERNEL_ENV[family]} = {env} ignored, a resumed run keeps its kernels"
        elif env is not None:
            kernels[family], how[family] = env, f"{KERNEL_ENV[family]} = {env}"
        elif not shapes[family]:
            kernels[family], how[family] = defaults[family], "default: no such layer"
        elif not measure:
            kernels[family], how[family] = defaults[family], "default: not measured"
        elif weights < MEASURE_MIN_WEIGHTS:
            kernels[family], how[family] = defaults[family], f"default: under {MEASURE_MIN_WEIGHTS:,} linear weights"
        elif family == "linear" and _ONEDNN_LINEAR is None:
            kernels[family], how[family] = "mkl", "oneDNN's linear kernel is not available"
        else:
            ms[family] = _measure(family, shapes[family], rows, reps, backward)
            kernels[family], how[family] = _measured_choice(family, ms[family], defaults)
        if family == "linear" and kernels[family] == "onednn" and _ONEDNN_LINEAR is None:
            kernels[family] = "mkl"
            how[family] += "; oneDNN's linear kernel is not available here"
    use_kernels(**kernels)
    return KernelChoice(kernels, how, ms)


@contextmanager
def sampling_kernels(
    model: nn.Module, *, recorded: Mapping[str, Any] | None = None, measure: bool = True, reps: int = 3
) -> Iterator[KernelChoice]:
    """Put the linear and grouped-convolution kernels that are faster for ``model``'s forward
    passes in force while inside; where oneDNN's linear kernel was measured faster beyond
    `MEASURE_MARGIN`, it takes products from `SAMPLING_MIN_ROWS` rows (else from
    `ONEDNN_MIN_ROWS`, as in training: a tie leaves the products between the two thresholds
    on MKL). The grouped convolutions (`GroupedConv1d.forward_without_grad`) run oneDNN's
    forward in the channels-first layout (``onednn``) or in the channels-last one
    (``channels_last``), whichever is faster beyond the margin (a tie keeps ``onednn``).
    Yields the `KernelChoice`; ``{**choice.kernels, "onednn_min_rows": choice.onednn_min_rows}``
    is what a continued sampling run passes back as ``recorded``.
    On leaving, the kernels and threshold in force before are restored, so a probe inside a
    training run leaves the run's training kernels as they were.

    The choice, per family as in `choose_cpu_kernels` with ``backward=False``: ``recorded``
    (``{"linear": kernel, "grouped_conv": kernel, "onednn_min_rows": rows}``, an earlier part
    of the same eval; a record without ``grouped_conv`` ran ``onednn``) wins; then the
    family's environment variable; then the faster forward pass at the model's own layer
    shapes at `SAMPLING_MEASURE_ROWS` rows (median of ``reps``, alternated; cached per
    process); models under `MEASURE_MIN_WEIGHTS` linear weights, and ``measure=False``, keep
    `SAMPLING_DEFAULT_KERNELS`.

    Raises:
        ConfigError: ``FLOWKIT_CPU_LINEAR`` or ``FLOWKIT_CPU_GROUPED_CONV`` names an unknown kernel.
        ValueError: ``recorded`` names an unknown kernel.
    """
    global _onednn_min_rows
    kernels_before, rows_before = dict(_kernels), _onednn_min_rows
    try:
        if recorded and "linear" in recorded:
            kernels = {"linear": recorded["linear"], "grouped_conv": recorded.get("grouped_conv", "onednn")}
            use_kernels(**kernels)
            rows = int(recorded.get("onednn_min_rows", ONEDNN_MIN_ROWS))
            choice = KernelChoice(kernels, dict.fromkeys(kernels, "recorded"), onednn_min_rows=rows)
        else:
            choice = choose_cpu_kernels(model, measure=measure, rows=SAMPLING_MEASURE_ROWS, reps=reps,
                                        backward=False, families=("linear", "grouped_conv"))
            ms = choice.ms.get("linear", {})
            won = choice.kernels["linear"] == "onednn" and bool(ms) and ms["onednn"] <= (1 - MEASURE_MARGIN) * ms["mkl"]
            choice = replace(choice, onednn_min_rows=SAMPLING_MIN_ROWS if won else ONEDNN_MIN_ROWS)
        _onednn_min_rows = choice.onednn_min_rows
        yield choice
    finally:
        _kernels.clear()
        _kernels.update(kernels_before)
        _onednn_min_rows = rows_before
