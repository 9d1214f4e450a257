"""Will the run fit? The step-0 memory estimate, the device's memory, and the probe.

Shape legend: b batch, n frames, nt characters, c model dim, td text dim, f feed-forward
multiple, L depth, P parameters.

A run that does not fit must stop before its first step with one line that says so
(F5-TTS #223, #833: out-of-memory at step 40,000, or a kernel OOM kill with no message).
Before training, `check_memory` estimates the peak of the most expensive batch the sampler
can produce and refuses a config whose estimate exceeds the memory of the device it is
about to use; `probe_step` then runs forward + backward on that batch, so a GPU that runs
out of memory does so at step 0 with the same kind of line.

The estimate (bytes), documented here and checked against the tensors autograd really
saves in ``tests/train/test_memory.py``:

- state: ``P * (4 weights + 4 gradients + 8 AdamW moments + 4 EMA)`` = ``20 P``;
- activations saved for the backward pass, ``s`` bytes per element (4 in float32, about 3
  under bf16 autocast, where matrix products save bf16 and normalisations float32):
  the blocks keep ``(30 + 2 f) c`` elements per packed frame and block (normalised and
  modulated inputs, qkv, rotated q and k in float32, attention output and its
  statistics, the feed-forward hidden pair, the per-frame modulation of packed rows;
  the constant was measured with saved-tensor hooks); with activation checkpointing only
  the block inputs ``c`` per frame and block stay, plus one block's worth while it is
  recomputed in the backward pass (``transient``). The input stage keeps ``(2d + td + 10 c)`` per padded frame, and per
  ConvNeXt layer ``14 td`` per padded frame (frames on the unaligned path, characters on
  the aligned one). The aligned path also holds the placement ``[b n nt]`` (float and
  boolean masks: ``12`` bytes per entry) and its duration head ``8 h`` per character;
- a working margin of 15 % over the sum for the allocator, temporaries and the
  attention kernels' workspace.

The available memory is the free memory of the CUDA device (``torch.cuda.mem_get_info``)
or, on the CPU, ``MemAvailable`` of ``/proc/meminfo`` (the whole machine's, minus nothing:
the estimate already counts everything the run will allocate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from flowkit.converters.checkpointing import is_checkpointed
from flowkit.errors import ConfigError

__all__ = ["MemoryEstimate", "MemoryError_", "available_bytes", "check_memory", "estimate_memory", "worst_batch"]

_MARGIN = 1.15


class MemoryError_(ConfigError):  # noqa: N801 -- not the builtin MemoryError
    """The run's estimated (or probed) peak memory exceeds what the device has."""


@attrs.frozen
class MemoryEstimate:
    """Estimated peak memory of one training step, in bytes."""

    state: float
    activations: float  # saved by the forward pass for the backward pass
    transient: float  # one block's activations while checkpointing recomputes it
    total: float

    def gb(self) -> float:
        return self.total / 1e9


def estimate_memory(
    model: Any,
    item_frames: Sequence[int],
    item_chars: Sequence[int] | None = None,
    *,
    padded_frames: int | None = None,
    padded_chars: int | None = None,
    autocast: bool = False,
    checkpointing: bool | None = None,
) -> MemoryEstimate:
    """Peak bytes of a training step of ``model`` (a DiT) on one batch (see the module docstring).

    ``checkpointing`` defaults to whether the model's blocks are checkpointed
    (`flowkit.converters.checkpointing`, ``Trainer.activation_checkpointing``).
    """
    s = model.cfg.sizes()
    c, td, depth, f, layers, h = s["dim"], s["text_dim"], s["depth"], s["ff_mult"], s["conv_layers"], s["dur_hidden"]
    if checkpointing is None:
        checkpointing = is_checkpointed(model)
    el = 3.0 if autocast else 4.0
    b = len(item_frames)
    frames = sum(item_frames)
    n_max = max(item_frames, default=0)
    n_pad = padded_frames if padded_frames is not None else b * n_max
    per_block = (30 + 2 * f) * c
    blocks = depth * c * frames if checkpointing else depth * per_block * frames
    transient = el * per_block * frames if checkpointing else 0.0
    stage = n_pad * (2 * model.latent_dim + td + 10 * c)
    if model.cfg.text_path == "unaligned":
        stage += layers * 14 * td * n_pad
        placement = 0.0
    else:
        chars = list(item_chars or [0] * b)
        nt_pad = padded_chars if padded_chars is not None else b * max(chars, default=0)
        stage += layers * 14 * td * nt_pad + 8 * h * nt_pad
        placement = 12.0 * b * n_max * max(chars, default=0)
    params = sum(p.numel() for p in model.parameters())
    state = 20.0 * params
    activations = el * (blocks + stage) + placement
    return MemoryEstimate(state=state, activations=activations, transient=transient,
                          total=_MARGIN * (state + activations + transient))


def available_bytes(device: torch.device) -> tuple[float, str]:
    """``(bytes, what)``: free memory of a CUDA device, or MemAvailable of this machine."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free), f"free on {torch.cuda.get_device_name(device)}"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024, "available RAM"
    except OSError:
        pass
    return math.inf, "RAM (unknown)"


def worst_batch(lengths: Sequence[int], sampler: Any) -> list[int]:
    """Item indices of the costliest batch ``sampler`` (a ``FrameBudget``) can form: the longest
    items, as many as its budget and item cap let one batch hold (by the sampler's own cost)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    costs = sampler.item_costs(list(lengths)) if hasattr(sampler, "item_costs") else lengths
    budget = getattr(sampler, "frame_budget", math.inf)
    cap = getattr(sampler, "max_items", len(order))
    chosen: list[int] = []
    total = 0.0
    for i in order:
        if costs[i] > budget:
            continue
        if len(chosen) >= cap or total + costs[i] > budget:
            break
        chosen.append(i)
        total += float(costs[i])
    return chosen


def check_memory(estimate: MemoryEstimate, device: torch.device, *, limit_gb: float | None = None) -> str:
    """A one-line summary when the estimate fits; raises when it does not.

    Raises:
        MemoryError_: the estimate exceeds the available memory (or ``limit_gb``), naming
            both figures and the fixes.
    """
    avail, what = (limit_gb * 1e9, "Trainer.max_memory_gb") if limit_gb is not None else available_bytes(device)
    line = f"estimated peak {estimate.gb():.1f} GB ({estimate.state / 1e9:.1f} GB weights, gradients, AdamW, EMA; " \
           f"{estimate.activations / 1e9:.1f} GB activations) for the costliest batch, {avail / 1e9:.1f} GB {what}"
    if estimate.total > avail:
        raise MemoryError_(
            f"this run cannot fit: {line}; on a CPU add gin/cpu.gin after the experiment, or lower "
            "batch_sampler.frame_budget.frame_budget, or set Trainer.activation_checkpointing = True "
            "(Trainer.memory_check = False skips this check)"
        )
    return line


def step0_check(model: Any, builder: Any, sampler: Any, lengths: Sequence[int], device: torch.device, *,
                autocast: bool, limit_gb: float | None = None) -> str:
    """Refuse a run whose costliest batch cannot fit, before step 0; probe it on CUDA.

    Builds the batch of `worst_batch` (with its own generator: the run's streams are not
    touched), estimates its peak, compares it with the device's memory, and on CUDA runs one
    forward + backward on it (the global torch generator is restored afterwards and the
    gradients dropped, so the run continues exactly as without the probe). On the CPU there
    is no probe: an out-of-memory there is a kill by the kernel, not an exception, so the
    estimate is the guard. Returns the summary line.

    Raises:
        MemoryError_: the estimate exceeds the memory, or the probe ran out of memory.
    """
    import numpy as np

    indices = worst_batch(lengths, sampler)
    if not indices:
        return "memory check skipped: no batch can be formed"
    # train=False: no CFG draws (they change no shape); the run's streams are not touched.
    batch, _ = builder.build(indices, np.random.default_rng(0), train=False)
    cond = batch.conditions  # the shapes: no prompt made on the CPU
    frames = list(cond.layout.lengths) if cond.layout is not None else cond.frame_mask.sum(1).tolist()
    estimate = estimate_memory(model, frames, cond.text_mask.sum(1).tolist(), padded_frames=cond.frame_mask.numel(),
                               padded_chars=cond.text.numel(), autocast=autocast)
    line = check_memory(estimate, device, limit_gb=limit_gb)
    if device.type != "cuda":
        return line
    with torch.random.fork_rng(devices=[device]):
        try:
            on_device = batch.to(device)
            t = torch.rand(on_device.x1.shape[0], device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                out = model(on_device.x1, t, on_device.cond).output
            out.float().pow(2).mean().backward()
            torch.cuda.synchronize(device)
        except torch.cuda.OutOfMemoryError:
            raise MemoryError_(
                f"forward + backward of the costliest batch ({len(indices)} items, {sum(frames)} frames) ran out of "
                f"memory on {torch.cuda.get_device_name(device)} at step 0 ({line}); lower "
                "batch_sampler.frame_budget.frame_budget or set Trainer.activation_checkpointing = True"
            ) from None
        finally:
            model.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
    peak = torch.cuda.max_memory_allocated(device) / 1e9
    torch.cuda.reset_peak_memory_stats(device)
    return f"{line}; probe forward + backward peaked at {peak:.1f} GB"
