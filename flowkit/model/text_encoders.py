"""The text encoder: character ids -> text features.

Shape legend: b batch, L positions (frames on the unaligned path, characters on the aligned
one), dt text channels.

An embedding table and ConvNeXt layers (`flowkit.model.blocks.ConvNeXtBlock`), as F5-TTS's;
F5-TTS's own rule (a fixed position table, its masking) is
`flowkit.interop.f5_network.F5TextEncoder`, under the same parameter names.
"""

from __future__ import annotations

import torch
from torch import nn

from flowkit.model.blocks import ConvNeXtBlock, masked

__all__ = ["TextEncoder"]


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
