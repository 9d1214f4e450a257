"""The CPU converter: swap a built model's ``nn.Linear``, ``nn.Dropout`` and grouped
``nn.Conv1d`` layers, in place, for the CPU layers of `flowkit.converters.cpu_kernels`, with
each layer's kernel chosen for this machine.

A model is built from standard ``torch.nn`` layers (`flowkit.model.dit.DiTConfig.build`);
`convert_cpu_kernels` then changes each layer's class to its CPU subclass (parameters, names,
state dicts and hooks stay, so optimizers, EMA shadows and checkpoints do not notice) and
sets its kernel; `revert_cpu_kernels` restores the plain classes. ``flowkit train`` applies
it on a CPU run unless ``Trainer.cpu_kernels = False``; sampling (``flowkit synthesize``,
``flowkit eval``) applies it inside `sampling_kernels`.

Which kernel is faster depends on the CPU, so the linear and grouped-convolution kernels are
chosen by measurement (`choose_cpu_kernels`): each candidate runs the model's own layer shapes
at `MEASURE_ROWS` rows, alternated, and the faster median wins unless the family's default is
within `MEASURE_MARGIN` of it. Models under `MEASURE_MIN_WEIGHTS` linear weights keep
`DEFAULT_KERNELS` unmeasured. ``FLOWKIT_CPU_LINEAR`` (``auto``, ``mkl``, ``onednn``) and
``FLOWKIT_CPU_GROUPED_CONV`` (``auto``, ``torch``, ``onednn``, ``channels_last``) fix a choice.

Two kernels of a family sum in another order, so their results differ in the last bits: a run
records its choice in each checkpoint's meta (`KernelChoice.record`) and a resume replays the
record whatever the measurement or the environment says, so it trains the same bits as a run
that never stopped; a checkpoint without a record trained with `DEFAULT_KERNELS`.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowkit.converters.cpu_kernels import (
    ONEDNN_MIN_ROWS,
    CpuDropout,
    CpuGroupedConv1d,
    CpuLinear,
    channels_last_conv1d,
    onednn_linear,
    onednn_linear_kernel,
    onednn_mm,
    torch_grouped_conv1d,
)
from flowkit.errors import ConfigError

__all__ = [
    "DEFAULT_KERNELS", "KERNELS", "KERNEL_ENV", "MEASURE_MARGIN", "MEASURE_MIN_WEIGHTS", "MEASURE_ROWS",
    "ONEDNN_MIN_ROWS", "SAMPLING_DEFAULT_KERNELS", "SAMPLING_MEASURE_ROWS", "SAMPLING_MIN_ROWS", "KernelChoice",
    "choose_cpu_kernels", "convert_cpu_kernels", "converted_kernels", "is_grouped_conv", "revert_cpu_kernels",
    "sampling_kernels",
]

SAMPLING_MIN_ROWS = 128
"""`CpuLinear`'s oneDNN threshold inside `sampling_kernels` where oneDNN's forward product was
measured faster: with no backward pass to amortise its set-up, it pays from fewer rows."""

SAMPLING_MEASURE_ROWS = 256
"""Rows of the forward products `sampling_kernels` times: a short utterance's frames at batch 1."""

KERNELS: dict[str, tuple[str, ...]] = {
    "linear": ("mkl", "onednn"), "grouped_conv": ("torch", "onednn", "channels_last"),
}
"""Each family's candidate kernels (`flowkit.converters.cpu_kernels.CpuLinear.kernel`,
`flowkit.converters.cpu_kernels.CpuGroupedConv1d.kernel`)."""

DEFAULT_KERNELS: dict[str, str] = {"linear": "onednn", "grouped_conv": "torch"}
"""The kernels of an unmeasured choice, and those of a checkpoint that records none."""

SAMPLING_DEFAULT_KERNELS: dict[str, str] = {"linear": "onednn", "grouped_conv": "onednn"}
"""The kernels `sampling_kernels` keeps on a tie (``grouped_conv=onednn``: oneDNN's forward in
the channels-first layout)."""

KERNEL_ENV: dict[str, str] = {"linear": "FLOWKIT_CPU_LINEAR", "grouped_conv": "FLOWKIT_CPU_GROUPED_CONV"}
"""The environment variable that fixes each family's kernel (``auto``: measure)."""

MEASURE_ROWS = 512
"""Rows (frames) of the products `choose_cpu_kernels` times: at `ONEDNN_MIN_ROWS`, small
enough that measuring a 4.5M-parameter model takes well under a second."""

MEASURE_MIN_WEIGHTS = 1_000_000
"""Linear weights a model needs for its kernels to be measured (the ``tiny`` preset has
0.17M, ``small`` 4.2M): smaller products are too small for the choice to matter, and an
unmeasured choice is the same in every process."""

MEASURE_MARGIN = 0.10
"""A measured kernel replaces the family's default only when it takes at least this share
less time: two kernels within it are a tie that the load of the moment could decide either
way, and two fresh runs of one config on one machine should train with the same kernels."""

# memo per process: (family, shapes, rows, threads, backward) -> {kernel: ms}
_measured: dict[tuple, dict[str, float]] = {}


def is_grouped_conv(module: nn.Module) -> bool:
    """Whether ``module`` is a grouped (not depthwise) ``nn.Conv1d``: the layers whose kernel
    `CpuGroupedConv1d` chooses (depthwise convolutions keep oneDNN's own kernel)."""
    return isinstance(module, nn.Conv1d) and 1 < module.groups < module.in_channels


@dataclass(frozen=True)
class KernelChoice:
    """The kernels a run uses, how each was chosen and what the measurement found.

    ``kernels``: ``{family: kernel}``; ``how``: ``{family: "measured" | "recorded" |
    "FLOWKIT_CPU_... = ..." | "default (...)"}``; ``ms``: ``{family: {kernel: ms}}``, the time of
    the model's layers of that family at the measured rows per candidate (empty where nothing
    was measured); ``onednn_min_rows``: the rows from which `CpuLinear` multiplies through
    oneDNN (`sampling_kernels`; None: `ONEDNN_MIN_ROWS`).
    """

    kernels: dict[str, str]
    how: dict[str, str]
    ms: dict[str, dict[str, float]] = field(default_factory=dict)
    onednn_min_rows: int | None = None

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


def _check_kernels(kernels: Mapping[str, str]) -> None:
    for family, kernel in kernels.items():
        if kernel not in KERNELS.get(family, ()):
            raise ValueError(f"cpu kernel {family}={kernel!r} is not known; use one of {KERNELS.get(family)}")


def convert_cpu_kernels(model: nn.Module, kernels: Mapping[str, str] = DEFAULT_KERNELS, *,
                        onednn_min_rows: int = ONEDNN_MIN_ROWS, inference_conv: str | None = None) -> nn.Module:
    """Swap, in place, every ``nn.Linear`` of ``model`` for `CpuLinear`, every ``nn.Dropout`` for
    `CpuDropout` and every grouped ``nn.Conv1d`` (`is_grouped_conv`) for `CpuGroupedConv1d`,
    with ``kernels`` (``{family: kernel}``; families not named keep a converted layer's kernel,
    or take `DEFAULT_KERNELS`) in force. ``inference_conv``: the grouped convolutions' kernel
    under ``torch.no_grad()`` (None: ``channels_last`` where that is ``kernels``' choice, else
    ``onednn``). Layers of other classes (subclasses included) are left alone. Returns ``model``.

    Raises:
        ValueError: an unknown family or kernel.
    """
    _check_kernels(kernels)
    if inference_conv is not None:
        _check_kernels({"grouped_conv": inference_conv})
    for module in model.modules():
        if type(module) in (nn.Linear, CpuLinear):
            module.__class__ = CpuLinear
            module.kernel = kernels.get("linear", getattr(module, "kernel", DEFAULT_KERNELS["linear"]))
            module.onednn_min_rows = onednn_min_rows
        elif type(module) in (nn.Dropout, CpuDropout):
            module.__class__ = CpuDropout
        elif type(module) in (nn.Conv1d, CpuGroupedConv1d) and is_grouped_conv(module):
            module.__class__ = CpuGroupedConv1d
            module.kernel = kernels.get("grouped_conv", getattr(module, "kernel", DEFAULT_KERNELS["grouped_conv"]))
            if inference_conv is None:
                inference_conv = "channels_last" if module.kernel == "channels_last" else "onednn"
            module.inference_kernel = inference_conv
    return model


_PLAIN = {CpuLinear: nn.Linear, CpuDropout: nn.Dropout, CpuGroupedConv1d: nn.Conv1d}
_STATE = ("kernel", "onednn_min_rows", "inference_kernel")


def revert_cpu_kernels(model: nn.Module) -> nn.Module:
    """Undo `convert_cpu_kernels` in place: every CPU layer of ``model`` becomes its ``nn``
    class again. Returns ``model``."""
    for module in model.modules():
        plain = _PLAIN.get(type(module))
        if plain is not None:
            module.__class__ = plain
            for name in _STATE:
                module.__dict__.pop(name, None)
    return model


def converted_kernels(model: nn.Module) -> dict[str, str]:
    """``{family: kernel}`` of ``model``'s converted layers (empty for a plain model)."""
    found: dict[str, str] = {}
    for module in model.modules():
        if isinstance(module, CpuLinear):
            found.setdefault("linear", module.kernel)
        elif isinstance(module, CpuGroupedConv1d):
            found.setdefault("grouped_conv", module.kernel)
    return found


def _layer_state(model: nn.Module) -> list[tuple[nn.Module, type, dict[str, Any]]]:
    return [(m, type(m), {k: m.__dict__[k] for k in _STATE if k in m.__dict__}) for m in model.modules()]


def _restore_layer_state(state: list[tuple[nn.Module, type, dict[str, Any]]]) -> None:
    for module, cls, attrs in state:
        module.__class__ = cls
        for name in _STATE:
            module.__dict__.pop(name, None)
        module.__dict__.update(attrs)


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
    """Forward + backward (``backward``; else the forward alone) of one ``[rows k_in] ->
    [rows k_out]`` layer through each linear kernel."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, k_in, generator=g).requires_grad_(backward)
    w = (torch.randn(k_out, k_in, generator=g) / k_in**0.5).requires_grad_(backward)
    b = torch.zeros(k_out).requires_grad_(backward)
    dy = torch.randn(rows, k_out, generator=g)
    if not backward:
        return {"mkl": _forward_only(F.linear, x, w, b), "onednn": _forward_only(onednn_mm, x, w, b)}

    def run(fn: Callable[..., torch.Tensor]) -> Callable[[], None]:
        def once() -> None:
            x.grad = w.grad = b.grad = None
            fn(x, w, b).backward(dy)
        return once

    return {"mkl": run(F.linear), "onednn": run(onednn_linear)}


def _grouped_conv_runs(conv: nn.Conv1d, rows: int, backward: bool = True) -> dict[str, Callable[[], None]]:
    """Forward + backward (``backward``; else the forward alone, of ``onednn`` and
    ``channels_last``, the sampler's two) of one grouped convolution of ``rows`` frames
    (``[rows // 512 or 1, c, n]``, a frames-major view as the model passes it) through each kernel."""
    frames = min(rows, 512)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(max(1, rows // frames), frames, conv.in_channels, generator=g).transpose(1, 2)
    x.requires_grad_(backward)
    w = conv.weight.detach().clone().requires_grad_(backward)
    b = None if conv.bias is None else conv.bias.detach().clone().requires_grad_(backward)
    pad, groups = int(conv.padding[0]), conv.groups

    def onednn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        return F.conv1d(x, w, b, padding=pad, groups=groups)

    def own(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        return torch_grouped_conv1d(x, w, b, pad, groups)

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

    return {"torch": run(own), "onednn": run(onednn), "channels_last": run(channels_last)}


def _measure(family: str, shapes: dict[tuple, tuple[int, Callable[[], dict[str, Callable[[], None]]]]],
             rows: int, reps: int, backward: bool = True) -> dict[str, float]:
    """``{kernel: ms}``: the sum over ``shapes`` (``{shape: (count, make_runs)}``) of count x
    the median forward + backward (or forward) time, memoised per process."""
    key = (family, tuple(sorted((s, c) for s, (c, _) in shapes.items())), rows, torch.get_num_threads(), backward)
    if key not in _measured:
        total: dict[str, float] = {}
        with torch.enable_grad():
            for count, make_runs in shapes.values():
                for kernel, ms in _median_ms(make_runs(), reps).items():
                    total[kernel] = total.get(kernel, 0.0) + count * ms
        _measured[key] = total
    return dict(_measured[key])


def _measured_choice(family: str, ms: Mapping[str, float],
                     defaults: Mapping[str, str] = DEFAULT_KERNELS) -> tuple[str, str]:
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
    """The CPU kernels for ``model``'s layers (plain or converted) in ``families``: timed
    forward + backward (``backward``; false: the forward alone, as `sampling_kernels` asks).
    Changes nothing: `convert_cpu_kernels` puts a choice in force.

    Per family, in this order: a resumed run's recorded kernel (``recorded``, a checkpoint
    meta's `KernelChoice.record`; a resumed run without one gets `DEFAULT_KERNELS`, what it
    trained with); the family's environment variable (`KERNEL_ENV`); the default where the
    model has no layer of the family, fewer than `MEASURE_MIN_WEIGHTS` linear weights, or
    ``measure`` is false (e.g. ranks of one distributed run, which must agree); else the
    faster candidate measured at the model's own layer shapes (each distinct shape once,
    weighted by its count, ``rows`` frames, median of ``reps``; memoised per process). Without
    oneDNN's linear kernel (not x86-64) linear is ``mkl``.

    Raises:
        ConfigError: an environment variable names an unknown kernel.
    """
    linears: dict[tuple, list] = {}
    convs: dict[tuple, list] = {}
    weights = 0
    for module in model.modules():
        if isinstance(module, nn.Linear):
            shape = (module.in_features, module.out_features)
            linears.setdefault(shape, [0, None])[0] += 1
            weights += module.in_features * module.out_features
        elif is_grouped_conv(module):
            shape = (module.in_channels, module.out_channels, module.kernel_size[0], module.groups, module.padding)
            convs.setdefault(shape, [0, module])[0] += 1
    shapes = {
        "linear": {s: (c, lambda s=s: _linear_runs(s[0], s[1], rows, backward)) for s, (c, _) in linears.items()},
        "grouped_conv": {s: (c, lambda m=m: _grouped_conv_runs(m, rows, backward)) for s, (c, m) in convs.items()},
    }
    defaults = DEFAULT_KERNELS if backward else SAMPLING_DEFAULT_KERNELS
    onednn_linear_available = onednn_linear_kernel() is not None
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
        elif family == "linear" and not onednn_linear_available:
            kernels[family], how[family] = "mkl", "oneDNN's linear kernel is not available"
        else:
            ms[family] = _measure(family, shapes[family], rows, reps, backward)
            kernels[family], how[family] = _measured_choice(family, ms[family], defaults)
        if family == "linear" and kernels[family] == "onednn" and not onednn_linear_available:
            kernels[family] = "mkl"
            how[family] += "; oneDNN's linear kernel is not available here"
    _check_kernels(kernels)
    return KernelChoice(kernels, how, ms)


@contextmanager
def sampling_kernels(
    model: nn.Module, *, recorded: Mapping[str, Any] | None = None, measure: bool = True, reps: int = 3
) -> Iterator[KernelChoice]:
    """Convert ``model`` (`convert_cpu_kernels`) to the linear and grouped-convolution kernels
    faster for its forward passes while inside; on leaving, every layer is as it was (a plain
    model plain again, a training run's converted model back on its training kernels).
    Where oneDNN's linear kernel was measured faster beyond `MEASURE_MARGIN`, it takes products
    from `SAMPLING_MIN_ROWS` rows (else from `ONEDNN_MIN_ROWS`, as in training). The grouped
    convolutions run oneDNN's forward in the channels-first layout (``onednn``) or the
    channels-last one (``channels_last``), whichever is faster beyond the margin.
    Yields the `KernelChoice`; ``{**choice.kernels, "onednn_min_rows": choice.onednn_min_rows}``
    is what a continued sampling run passes back as ``recorded``.

    The choice, per family as in `choose_cpu_kernels` with ``backward=False``: ``recorded``
    (``{"linear": kernel, "grouped_conv": kernel, "onednn_min_rows": rows}``, an earlier part
    of the same eval; a record without ``grouped_conv`` ran ``onednn``) wins; then the
    family's environment variable; then the faster forward pass at the model's own layer
    shapes at `SAMPLING_MEASURE_ROWS` rows; models under `MEASURE_MIN_WEIGHTS` linear weights,
    and ``measure=False``, keep `SAMPLING_DEFAULT_KERNELS`.

    Raises:
        ConfigError: ``FLOWKIT_CPU_LINEAR`` or ``FLOWKIT_CPU_GROUPED_CONV`` names an unknown kernel.
        ValueError: ``recorded`` names an unknown kernel.
    """
    state = _layer_state(model)
    try:
        if recorded and "linear" in recorded:
            kernels = {"linear": recorded["linear"], "grouped_conv": recorded.get("grouped_conv", "onednn")}
            _check_kernels(kernels)
            rows = int(recorded.get("onednn_min_rows") or ONEDNN_MIN_ROWS)
            choice = KernelChoice(kernels, dict.fromkeys(kernels, "recorded"), onednn_min_rows=rows)
        else:
            choice = choose_cpu_kernels(model, measure=measure, rows=SAMPLING_MEASURE_ROWS, reps=reps,
                                        backward=False, families=("linear", "grouped_conv"))
            ms = choice.ms.get("linear", {})
            won = choice.kernels["linear"] == "onednn" and bool(ms) and ms["onednn"] <= (1 - MEASURE_MARGIN) * ms["mkl"]
            choice = replace(choice, onednn_min_rows=SAMPLING_MIN_ROWS if won else ONEDNN_MIN_ROWS)
        convert_cpu_kernels(model, {"linear": choice.kernels["linear"]}, onednn_min_rows=choice.onednn_min_rows,
                            inference_conv=choice.kernels["grouped_conv"])
        yield choice
    finally:
        _restore_layer_state(state)
