"""Text encoders: character ids -> text features, flowkit's rule and F5-TTS's.

Shape legend: b batch, L positions (frames on the unaligned path, characters on the aligned
one), n frames, dt text channels.

Both are an embedding table and ConvNeXt layers (`flowkit.model.blocks.ConvNeXtBlock`) with
the same parameter names, so the state dicts of both archs have one layout; they differ in
F5-TTS's fixed position table and its masking rule (`flowkit.model.f5_arch`).
"""

from __future__ import annotations

import torch
from torch import nn

from flowkit.model.blocks import ConvNeXtBlock, masked

__all__ = ["F5TextEncoder", "TEXT_POSITIONS", "TextEncoder", "text_position_table"]

#: F5-TTS precomputes its text position table for 8192 frames (~87 s at 93.75 Hz) and
#: clamps nothing beyond: longer items are an error there and here.
TEXT_POSITIONS = 8192


class TextEncoder(nn.Module):
    """Character ids ``[b L]`` -> ``[b L text_dim]``: embedding and ConvNeXt layers (F5-TTS).

    ``L`` is the frame count on the unaligned path and the character count on the aligned
    one; positions where ``mask`` is False come out zero (``mask`` None: every position valid).
    """

    def __init__(self, vocab_size: int, dim: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList(ConvNeXtBlock(dim) for _ in range(layers))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        x = masked(self.embed(ids), mask)
        for block in self.blocks:
            x = block(x, mask)
        return x


def text_position_table(dim: int, n: int) -> torch.Tensor:
    """``[n dim]`` fixed positions: ``cos(p w_i)`` in the first half, ``sin(p w_i)`` in the
    second, ``w_i = 10^4^(-2i / dim)``."""
    freqs = 1.0 / (10_000.0 ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    angle = torch.outer(torch.arange(n, dtype=torch.float32), freqs)
    return torch.cat([torch.cos(angle), torch.sin(angle)], dim=-1)


class F5TextEncoder(nn.Module):
    """Character ids on frames ``[b n]`` -> ``[b n dt]`` by F5-TTS's text-encoder rule.

    Uses the ``embed`` table and ConvNeXt ``blocks`` of a flowkit `TextEncoder` (same
    parameter names), so the state dicts of both archs have one layout.
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
