"""The pieces of F5-TTS's DiT whose arithmetic differs from flowkit's own (``model.dit.arch``).

Shape legend: b batch, n latent frames, dt text channels.

A `flowkit.model.dit.DiT` built with ``arch = "f5_v1"`` or ``"f5_base"`` computes the
function of F5-TTS's ``DiT`` (Chen et al. 2024, "F5-TTS: A Fairytaler that Fakes Fluent and
Faithful Speech with Flow Matching"; configurations ``F5TTS_v1_Base.yaml`` and
``F5TTS_Base.yaml`` of SWivid/F5-TTS), so F5's released weights load into it unchanged
(`flowkit.interop.f5`). What differs from flowkit's own DiT:

- the time embedding spaces its sinusoid frequencies by ``log(10^4) / (half - 1)``;
- the text encoder adds a fixed sinusoidal position table (cos | sin halves, base 10^4)
  to the character embeddings of the item's frames, and masks by F5's rule: with
  ``text_mask_padding`` (v1) every filler position (id 0) is zeroed before the ConvNeXt
  layers and after each one, while the global response norm inside a layer sees all
  positions; without it (original base) nothing is masked;
- a dropped text (CFG) runs the text encoder on filler ids instead of zeroing its output
  (its filler mask still from the real text, so the text's length shows through);
- the convolutional position embedding uses Mish;
- the original base applies rotary positions to the first attention head only
  (``pe_attn_head = 1``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ARCHS", "F5TextEncoder", "f5_arch_options", "text_position_table"]

#: ``model.dit.arch`` values: flowkit's own network and the two F5-TTS configurations.
ARCHS = ("flowkit", "f5_v1", "f5_base")

#: F5-TTS precomputes its text position table for 8192 frames (~87 s at 93.75 Hz) and
#: clamps nothing beyond: longer items are an error there and here.
TEXT_POSITIONS = 8192


def f5_arch_options(arch: str) -> dict[str, object]:
    """``{"text_mask_padding": bool, "pe_attn_head": int | None}`` of an F5 arch, read from
    F5-TTS's ``F5TTS_v1_Base.yaml`` (True, None) and ``F5TTS_Base.yaml`` (False, 1)."""
    return {"f5_v1": {"text_mask_padding": True, "pe_attn_head": None},
            "f5_base": {"text_mask_padding": False, "pe_attn_head": 1}}[arch]


def text_position_table(dim: int, n: int) -> torch.Tensor:
    """``[n dim]`` fixed positions: ``cos(p w_i)`` in the first half, ``sin(p w_i)`` in the
    second, ``w_i = 10^4^(-2i / dim)``."""
    freqs = 1.0 / (10_000.0 ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    angle = torch.outer(torch.arange(n, dtype=torch.float32), freqs)
    return torch.cat([torch.cos(angle), torch.sin(angle)], dim=-1)


def f5_time_sinusoid(t: torch.Tensor, dim: int, scale: float) -> torch.Tensor:
    """``[b dim]`` sin | cos features of ``t * scale`` with frequencies ``exp(-i log(10^4) / (half - 1))``."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, device=t.device).float() * -(math.log(10_000.0) / (half - 1)))
    angle = scale * t.float()[:, None] * freqs[None, :]
    return torch.cat([angle.sin(), angle.cos()], dim=-1)


class F5TextEncoder(nn.Module):
    """Character ids on frames ``[b n]`` -> ``[b n dt]`` by F5-TTS's text-encoder rule.

    Uses the ``embed`` table and ConvNeXt ``blocks`` of a flowkit `TextEncoder` (same
    parameter names), so the state dicts of both archs have one layout.
    """

    def __init__(self, vocab_size: int, dim: int, layers: int, mask_padding: bool) -> None:
        super().__init__()
        from flowkit.model.dit import ConvNeXtBlock

        self.embed = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList(ConvNeXtBlock(dim) for _ in range(layers))
        self.mask_padding = mask_padding
        self.register_buffer("positions", text_position_table(dim, TEXT_POSITIONS), persistent=False)

    def forward(
        self, ids: torch.Tensor, valid: torch.Tensor, drop: torch.Tensor | None = None, *, confine: bool = False
    ) -> torch.Tensor:
        """``ids [b n]`` (0 = filler, already 0 outside ``valid``), ``valid [b n]`` the item's
        frames, ``drop [b]`` items whose text is dropped (CFG): as in F5-TTS they are encoded
        as filler ids, while the filler mask still comes from the real text.

        ``confine=False`` is F5's rule for a padded batch (frames past an item's end enter
        its convolutions and response norm); ``confine=True`` keeps every item as if alone
        (zero past its end before each layer, norm over its frames): what F5 computes for an
        unpadded item, and what flowkit's own forward uses so items stay independent.

        Raises:
            ValueError: more than 8192 frames (F5-TTS's position table).
        """
        n = ids.shape[1]
        if n > TEXT_POSITIONS:
            raise ValueError(f"F5-TTS's text encoder holds at most {TEXT_POSITIONS} frames, got {n}")
        filler = ids == 0
        if drop is not None:
            ids = ids.masked_fill(drop[:, None], 0)
        x = self.embed(ids).masked_fill(~valid[..., None], 0.0)
        if not self.blocks:
            return x
        x = x + self.positions[:n].to(x.dtype) * valid[..., None].to(x.dtype)
        if self.mask_padding:
            x = x.masked_fill(filler[..., None], 0.0)
        for block in self.blocks:
            if confine:
                x = x.masked_fill(~valid[..., None], 0.0)
            x = x + block.residual_branch(x, valid if confine else None)
            if self.mask_padding:
                x = x.masked_fill(filler[..., None], 0.0)
        return x.masked_fill(~valid[..., None], 0.0) if confine else x


def mish(x: torch.Tensor) -> torch.Tensor:
    """Mish activation (Misra 2019), F5-TTS's choice in its convolutional position embedding."""
    return F.mish(x)
