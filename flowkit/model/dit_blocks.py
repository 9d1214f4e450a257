"""The DiT's transformer blocks: adaLN-Zero modulated attention and feed-forward, and the
final layer that projects back to the latent channels.

Shape legend: b batch, n latent frames, d latent channels, c model dim; T the packed frames
of a batch (`flowkit.model.packing`).

Each block's shift, scale and gate come from the conditioning vector (the flow time plus
the global conditions) through a zero-initialised projection (adaLN-Zero, Peebles & Xie
2023, "Scalable Diffusion Models with Transformers"), so every block starts as identity.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from flowkit.model.attention import Attention
from flowkit.model.packing import PackedIndex

__all__ = ["DiTBlock", "FinalLayer"]


class DiTBlock(nn.Module):
    """Pre-norm transformer block with adaLN-Zero: shift, scale and a zero-initialised gate
    for each branch come from the conditioning vector, so every block starts as identity."""

    def __init__(self, dim: int, heads: int, ff_mult: int, dropout: float) -> None:
        super().__init__()
        self.modulation = nn.Linear(dim, 6 * dim)
        nn.init.zeros_(self.modulation.weight)
        nn.init.zeros_(self.modulation.bias)
        self.attn_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads, dropout)
        self.ff_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = nn.Sequential(
            nn.Linear(dim, ff_mult * dim),
            nn.GELU(approximate="tanh"),
            nn.Dropout(dropout),
            nn.Linear(ff_mult * dim, dim),
        )

    def forward(
        self,
        x: torch.Tensor,
        c: torch.Tensor,
        rope: torch.Tensor,
        packed: PackedIndex | None = None,
    ) -> torch.Tensor:
        """``x [b n c]`` (or packed ``[1 T c]``), conditioning ``c [b c]`` per item, rotary
        table ``rope`` (see `Attention`)."""
        mod = self.modulation(F.silu(c))
        mod = mod[:, None, :] if packed is None else packed.per_frame(mod)
        shift1, scale1, gate1, shift2, scale2, gate2 = mod.chunk(6, dim=-1)
        # addcmul: shift + norm * (1 + scale) and x + gate * branch, one pass each
        x = torch.addcmul(x, gate1, self.attn(torch.addcmul(shift1, self.attn_norm(x), 1 + scale1), rope, packed))
        return torch.addcmul(x, gate2, self.ff(torch.addcmul(shift2, self.ff_norm(x), 1 + scale2)))


class FinalLayer(nn.Module):
    """adaLN-modulated norm and a zero-initialised projection to the latent channels."""

    def __init__(self, dim: int, out_dim: int) -> None:
        super().__init__()
        self.modulation = nn.Linear(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.proj = nn.Linear(dim, out_dim)
        for layer in (self.modulation, self.proj):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor, c: torch.Tensor, packed: PackedIndex | None = None) -> torch.Tensor:
        mod = self.modulation(F.silu(c))
        shift, scale = (mod[:, None, :] if packed is None else packed.per_frame(mod)).chunk(2, dim=-1)
        return self.proj(torch.addcmul(shift, self.norm(x), 1 + scale))
