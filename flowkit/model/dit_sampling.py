"""What every step of a sampler shares: the DiT's forward pass split at ``x_t`` and ``t``.

Shape legend: b batch, n latent frames, d latent channels, c model dim, g passes (1, or 2
with classifier-free guidance), T the packed frames of the ``b`` items, h heads, hd head dim.

A sampler calls the model at many flow times on the same conditions. `prepare_sampling`
computes once all of the forward pass that depends on neither the noisy sample ``x_t`` nor
the flow time (the text encoder and the text placed on frames, the prompt, their share of
the input projection, the global conditions, the packed layout, the rotary table), with
the unconditional pass of guidance batched behind the conditional one; `forward_prepared`
is then the rest of the forward pass at each step. `flowkit.model.dit_network.DiT` calls
both (`DiT.prepare_sampling`, `DiT.forward` given `SamplingConditions`); the results equal
separate forward passes on each pass's conditions to float32 rounding.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
import torch.nn.functional as F

from flowkit.model.blocks import masked
from flowkit.model.conditions import Conditions
from flowkit.model.packing import PackedIndex, PackLayout

__all__ = ["SamplingConditions", "forward_prepared", "prepare_sampling"]


@attrs.frozen
class SamplingConditions:
    """What every step of a sampler shares, computed once by `DiT.prepare_sampling`: all of
    the forward pass that depends on neither the noisy sample ``x_t`` nor the flow time.

    ``g`` passes (1: conditional; 2: conditional then unconditional, for classifier-free
    guidance) run as one batch of ``g b`` items. Shape legend as in the module, and T the
    packed frames of the ``b`` items.

    Attributes:
        cond: the conditions of the conditional pass (``b`` items of ``n`` frames).
        passes: ``g``.
        phase: the aligned path's phase the text was placed with.
        base: ``[g*b n c]`` the input projection of the prompt and the text, bias included
            (``x_t``'s share is added at every step).
        x_weight: ``[c d]`` the input projection's columns that read ``x_t``.
        valid: ``[b n]`` the valid frames, None when the batch has no padding (dense).
        valid_rows: ``valid`` for the ``g*b`` items, or None.
        globals: ``[b c]`` the global-condition embedding (None without conditions).
        rope: the rotary table of the blocks' frames (``[n 1|h hd/2]``, packed ``[T 1|h hd/2]``).
        packed: the items' packed layout, None when dense.
        pack_src: ``[g*T]`` flat position in ``[g*b*n + 1]`` rows of each packed frame of the
            ``g`` stacked sequences (the last row zero), or None when dense.
        unpack_rows, unpack_dst: ``[g*V]`` packed frames that hold an item and their flat
            positions in ``[g*b*n]``, or None when dense.
    """

    cond: Conditions
    passes: int
    phase: str
    base: torch.Tensor
    x_weight: torch.Tensor
    valid: torch.Tensor | None
    valid_rows: torch.Tensor | None
    globals: torch.Tensor | None
    rope: torch.Tensor
    packed: PackedIndex | None
    pack_src: torch.Tensor | None
    unpack_rows: torch.Tensor | None
    unpack_dst: torch.Tensor | None


def prepare_sampling(model: Any, cond: Conditions, *, guidance: bool, phase: str) -> SamplingConditions:
    """The `SamplingConditions` of ``model`` (a `flowkit.model.dit_network.DiT`) on ``cond``;
    ``guidance`` adds the unconditional pass (text and prompt dropped); ``phase`` as
    `DiT.forward` takes it (checked by `DiT.prepare_sampling`). Call it under ``torch.no_grad()``.

    Raises:
        ValueError: (aligned path) conditions without unit timings.
    """
    b, n = cond.frame_mask.shape
    frame = cond.frame_mask
    layout = cond.layout if cond.layout is not None else PackLayout.plan(frame.sum(1).tolist())
    dense = layout.is_dense(n)
    valid = None if dense else frame
    passes = [cond]
    if guidance:
        passes.append(cond.replace(drop_text=torch.ones_like(cond.drop_text),
                                   drop_prompt=torch.ones_like(cond.drop_prompt)))
    dtype = model.input_proj.weight.dtype
    features = []
    for p in passes:
        prompt = masked(p.prompt.to(dtype), frame & ~p.target_mask & ~p.drop_prompt[:, None])
        features.append(torch.cat([prompt, model.text_frames(p, phase, valid)[0].to(dtype)], dim=-1))
    d = model.latent_dim
    weight = model.input_proj.weight
    base = F.linear(torch.cat(features), weight[:, d:].contiguous(), model.input_proj.bias)
    g = len(passes)
    device = frame.device
    if dense:
        packed = pack_src = unpack_rows = unpack_dst = None
        rope = model.rotary(n, device)
    else:
        packed = layout.index(n, device)
        rope = model.rotary(max(packed.max_len, 1), device).index_select(0, packed.pos)
        flat, zero = b * n, g * b * n  # the g stacked batches' rows, then one zero row
        pad = packed.src == flat
        pack_src = torch.cat([torch.where(pad, zero, packed.src + k * flat) for k in range(g)])
        rows = torch.arange(packed.src.shape[0], device=device)
        rows = rows if packed.valid is None else packed.valid
        unpack_rows = torch.cat([rows + k * packed.src.shape[0] for k in range(g)])
        unpack_dst = torch.cat([packed.valid_src + k * flat for k in range(g)])
    return SamplingConditions(
        cond=cond, passes=g, phase=phase, base=base, x_weight=weight[:, :d].contiguous(),
        valid=valid, valid_rows=None if valid is None else valid.repeat(g, 1),
        globals=None if model.globals is None else model.globals(cond), rope=rope, packed=packed,
        pack_src=pack_src, unpack_rows=unpack_rows, unpack_dst=unpack_dst,
    )


def forward_prepared(model: Any, x_t: torch.Tensor, t: torch.Tensor, s: SamplingConditions) -> torch.Tensor:
    """The model's output ``[g*b n d]`` for ``x_t [b n d]`` at flow times ``t [b]`` on prepared
    conditions ``s``: every pass of the same ``x_t``, the conditional one first.

    Raises:
        ValueError: ``x_t`` does not match the prepared frames or the latent dim.
    """
    b, n, d = x_t.shape
    g = s.passes
    if d != model.latent_dim or s.cond.frame_mask.shape != (b, n):
        raise ValueError(
            f"x_t {tuple(x_t.shape)} does not match the prepared frame_mask "
            f"{tuple(s.cond.frame_mask.shape)} and latent_dim {model.latent_dim}"
        )
    h = F.linear(masked(x_t, s.valid), s.x_weight)  # x_t's share, once for every pass
    h = (s.base.view(g, b, n, -1) + h).view(g * b, n, -1)
    if model.conv_pos is not None:
        h = model.conv_pos(h, s.valid_rows)
    c = model.time(t.to(x_t.device))
    if s.globals is not None:
        c = c + s.globals
    packed = s.packed
    if packed is None:
        c = c.repeat(g, 1)  # [g*b c]: every pass of an item has the item's conditioning
    else:  # the g passes as g rows of one layout, modulated per frame alike
        c_dim = h.shape[-1]
        h = torch.cat([h.reshape(g * b * n, c_dim), h.new_zeros(1, c_dim)]).index_select(0, s.pack_src)
        h = h.view(g, -1, c_dim)
    out = model.trunk(h, c, s.rope, packed)
    if packed is not None:
        rows = out.reshape(-1, out.shape[-1]).index_select(0, s.unpack_rows)
        out = out.new_zeros(g * b * n, out.shape[-1]).index_copy(0, s.unpack_dst, rows).view(g * b, n, -1)
    return out
