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

This module holds the switch and the time sinusoid; F5's text encoder is
`flowkit.model.text_encoders.F5TextEncoder`, Mish `flowkit.model.blocks.mish`, and the
rotation of the first head `flowkit.model.attention.rotary_tables_on_heads`.
"""

from __future__ import annotations

import math

import torch

__all__ = ["ARCHS", "f5_arch_options", "f5_time_sinusoid"]

#: ``model.dit.arch`` values: flowkit's own network and the two F5-TTS configurations.
ARCHS = ("flowkit", "f5_v1", "f5_base")

def f5_arch_options(arch: str) -> dict[str, object]:
    """``{"text_mask_padding": bool, "pe_attn_head": int | None}`` of an F5 arch, read from
    F5-TTS's ``F5TTS_v1_Base.yaml`` (True, None) and ``F5TTS_Base.yaml`` (False, 1)."""
    return {"f5_v1": {"text_mask_padding": True, "pe_attn_head": None},
            "f5_base": {"text_mask_padding": False, "pe_attn_head": 1}}[arch]


def f5_time_sinusoid(t: torch.Tensor, dim: int, scale: float) -> torch.Tensor:
    """``[b dim]`` sin | cos features of ``t * scale`` with frequencies ``exp(-i log(10^4) / (half - 1))``."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, device=t.device).float() * -(math.log(10_000.0) / (half - 1)))
    angle = scale * t.float()[:, None] * freqs[None, :]
    return torch.cat([angle.sin(), angle.cos()], dim=-1)
