"""F5-TTS's DiT arithmetic as a subclass of flowkit's `DiT` (``model.dit.arch = "f5_v1" | "f5_base"``).

Shape legend: b batch, n latent frames, dt text channels, h heads, hd head dim.

`F5DiT` computes the function of F5-TTS's ``DiT`` (Chen et al. 2024, "F5-TTS: A Fairytaler
that Fakes Fluent and Faithful Speech with Flow Matching"; configurations
``F5TTS_v1_Base.yaml`` and ``F5TTS_Base.yaml`` of SWivid/F5-TTS), so F5's released weights
load into it unchanged (`flowkit.interop.f5`). It has the parameter names of flowkit's DiT
and differs only where F5's arithmetic does:

- the time embedding spaces its sinusoid frequencies by ``log(10^4) / (half - 1)``;
- the text encoder adds a fixed sinusoidal position table (cos | sin halves, base 10^4) to
  the character embeddings of the item's frames, and masks by F5's rule: with
  ``text_mask_padding`` (v1) every filler position (id 0) is zeroed before the ConvNeXt
  layers and after each one, while the global response norm inside a layer sees all
  positions; without it (original base) nothing is masked;
- a dropped text (CFG) runs the text encoder on filler ids instead of zeroing its output
  (its filler mask still from the real text, so the text's length shows through);
- the convolutional position embedding uses Mish (Misra 2019) where flowkit's uses SiLU;
- the global conditions start at exactly zero (an F5 model has none);
- the original base rotates the first attention head only (``pe_attn_head = 1``).

The architecture names are declared as entry points of group ``flowkit.networks``
(`flowkit.entry_points.networks`), which `flowkit.model.dit.DiTConfig.build` reads.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowkit.errors import ConfigError
from flowkit.model.attention import rotary_tables
from flowkit.model.blocks import ConvNeXtBlock, ConvPositionEmbedding
from flowkit.model.conditioning import GlobalEmbedding, TimeEmbedding
from flowkit.model.conditions import Conditions
from flowkit.model.dit_network import DiT, ids_on_frames

__all__ = [
    "F5_ARCH_OPTIONS", "F5DiT", "F5TextEncoder", "TEXT_POSITIONS", "f5_time_sinusoid", "rotary_tables_on_heads",
    "text_position_table",
]

#: ``{arch: {"text_mask_padding": bool, "pe_attn_head": int | None}}``, read from F5-TTS's
#: ``F5TTS_v1_Base.yaml`` (True, None) and ``F5TTS_Base.yaml`` (False, 1).
F5_ARCH_OPTIONS: dict[str, dict[str, Any]] = {
    "f5_v1": {"text_mask_padding": True, "pe_attn_head": None},
    "f5_base": {"text_mask_padding": False, "pe_attn_head": 1},
}

#: F5-TTS precomputes its text position table for 8192 frames (~87 s at 93.75 Hz) and
#: clamps nothing beyond: longer items are an error there and here.
TEXT_POSITIONS = 8192


def f5_time_sinusoid(t: torch.Tensor, dim: int, scale: float = 1000.0) -> torch.Tensor:
    """``[b dim]`` sin | cos features of ``t [b] * scale`` (F5-TTS: t * 1000) with frequencies
    ``exp(-i log(10^4) / (half - 1))``."""
    half = dim // 2
    freqs = torch.exp(torch.arange(half, device=t.device).float() * -(math.log(10_000.0) / (half - 1)))
    angle = scale * t.float()[:, None] * freqs[None, :]
    return torch.cat([angle.sin(), angle.cos()], dim=-1)


def text_position_table(dim: int, n: int) -> torch.Tensor:
    """``[n dim]`` fixed positions: ``cos(p w_i)`` in the first half, ``sin(p w_i)`` in the
    second, ``w_i = 10^4^(-2i / dim)``."""
    freqs = 1.0 / (10_000.0 ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    angle = torch.outer(torch.arange(n, dtype=torch.float32), freqs)
    return torch.cat([torch.cos(angle), torch.sin(angle)], dim=-1)


def rotary_tables_on_heads(
    n: int, head_dim: int, heads: int, rotated: int, device: torch.device
) -> torch.Tensor:
    """``cos + i sin`` ``[n heads head_dim/2]`` rotating only the first ``rotated`` heads
    (F5-TTS's ``pe_attn_head``); the others get the identity (1 + 0i: exact)."""
    table = rotary_tables(n, head_dim, device)
    keep = (torch.arange(heads, device=device) < rotated)[None, :, None]
    return torch.where(keep, table, torch.ones_like(table))


class F5TextEncoder(nn.Module):
    """Character ids on frames ``[b n]`` -> ``[b n dt]`` by F5-TTS's text-encoder rule.

    Holds the ``embed`` table and ConvNeXt ``blocks`` under the names of flowkit's
    `flowkit.model.text_encoders.TextEncoder`, so the state dicts of both archs have one layout.
    """

    def __init__(self, vocab_size: int, dim: int, layers: int, mask_padding: bool) -> None:
        super().__init__()
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
        unpadded item, and what `F5DiT` uses so items stay independent.

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


class F5DiT(DiT):
    """F5-TTS's DiT (module docstring) under flowkit's parameter names; built by
    `flowkit.model.dit.DiTConfig.build` for ``arch = "f5_v1"`` or ``"f5_base"``.

    Raises:
        ConfigError: the config's arch is not an F5 arch, or its text path is not ``unaligned``
            (F5-TTS has no other).
    """

    def __init__(self, cfg: Any, latent_dim: int, vocab_size: int, n_languages: int) -> None:
        if cfg.arch not in F5_ARCH_OPTIONS:
            archs = " or ".join(map(repr, F5_ARCH_OPTIONS))
            raise ConfigError(f"F5DiT builds model.dit.arch {archs}, not {cfg.arch!r}")
        if cfg.text_path != "unaligned":
            raise ConfigError(
                f"model.dit.arch = {cfg.arch!r} is F5-TTS's network, which has only the unaligned "
                "text path; set model.dit.text_path = 'unaligned' or arch = 'flowkit'"
            )
        super().__init__(cfg, latent_dim, vocab_size, n_languages)

    @property
    def options(self) -> dict[str, Any]:
        """F5-TTS's ``text_mask_padding`` and ``pe_attn_head`` of this arch (`F5_ARCH_OPTIONS`)."""
        return F5_ARCH_OPTIONS[self.cfg.arch]

    def make_text_encoder(self, vocab_size: int, text_dim: int, layers: int) -> nn.Module:
        return F5TextEncoder(vocab_size, text_dim, layers, self.options["text_mask_padding"])

    def make_conv_pos(self, dim: int, kernel: int) -> nn.Module:
        return ConvPositionEmbedding(dim, kernel, activation=F.mish)

    def make_time(self, dim: int) -> nn.Module:
        return TimeEmbedding(dim, sinusoid=f5_time_sinusoid)

    def make_globals(self, dim: int, n_languages: int) -> nn.Module:
        return GlobalEmbedding(dim, n_languages, zero=True)

    def rotary(self, n: int, device: torch.device) -> torch.Tensor:
        """``[n 1 hd/2]``, or ``[n h hd/2]`` when only the first heads rotate (``pe_attn_head``)."""
        rotated = self.options["pe_attn_head"]
        if rotated is None:
            return rotary_tables(n, self.head_dim, device)
        return rotary_tables_on_heads(n, self.head_dim, self.cfg.sizes()["heads"], rotated, device)

    def text_frames(
        self, cond: Conditions, phase: str, valid: torch.Tensor | None
    ) -> tuple[torch.Tensor, None]:
        """Text features on frames ``[b n dt]``: F5's text encoder on the ids placed on frames,
        each item encoded as if alone; a dropped text is encoded as filler ids."""
        return self.text(ids_on_frames(cond), cond.frame_mask, cond.drop_text, confine=True), None
