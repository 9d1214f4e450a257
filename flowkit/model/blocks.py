"""Building blocks shared by the DiT's input stage and both text encoders.

Shape legend: b batch, L positions (frames or characters), c channels.

ConvNeXt-V2 (Woo et al. 2023, "ConvNeXt V2: Co-designing and Scaling ConvNets with Masked
Autoencoders") in its 1-D form as F5-TTS uses it, and the convolutional position embedding
of F5-TTS's input stage. Every block takes the mask of valid positions and keeps padding
out of its convolutions and norms.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ConvNeXtBlock", "ConvPositionEmbedding", "GlobalResponseNorm", "masked"]


def masked(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``x [b L c]`` with positions where ``mask [b L]`` is False set to exactly zero
    (``x`` itself when ``mask`` is None: every position valid)."""
    return x if mask is None else x.masked_fill(~mask[..., None], 0.0)


class GlobalResponseNorm(nn.Module):
    """ConvNeXt-V2 global response normalisation over valid positions (Woo et al. 2023)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.zeros(dim))
        self.beta = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``x [b L c]``, ``mask [b L]`` the valid positions (None: all)."""
        x = masked(x, mask)  # padding must not enter the sequence norm
        gx = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
        return self.gamma * (x * nx) + self.beta + x


class ConvNeXtBlock(nn.Module):
    """1-D ConvNeXt-V2 block (depthwise conv 7, LayerNorm, MLP x2 with GRN), residual."""

    def __init__(self, dim: int, kernel: int = 7) -> None:
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.up = nn.Linear(dim, 2 * dim)
        self.grn = GlobalResponseNorm(2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``x [b L c]``, ``mask [b L]`` the valid positions (None: all)."""
        h = self.dwconv(masked(x, mask).transpose(1, 2)).transpose(1, 2)
        h = self.grn(F.gelu(self.up(self.norm(h))), mask)
        return masked(x + self.down(h), mask)

    def residual_branch(self, x: torch.Tensor, grn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The branch alone, unmasked (F5-TTS's text encoder); the response norm over
        ``grn_mask [b L]`` positions, every position when None."""
        h = self.dwconv(x.transpose(1, 2)).transpose(1, 2)
        if grn_mask is None:
            grn_mask = torch.ones(h.shape[:2], dtype=torch.bool, device=h.device)
        return self.down(self.grn(F.gelu(self.up(self.norm(h))), grn_mask))


class ConvPositionEmbedding(nn.Module):
    """Two grouped convolutions (kernel 31 in F5-TTS) added to the input: local context and a
    sense of relative position before the first attention layer. ``activation`` between
    them: SiLU by default, where F5-TTS uses Mish (the same shape of curve, and several times
    cheaper to differentiate on the CPU)."""

    def __init__(
        self, dim: int, kernel: int, activation: Callable[[torch.Tensor], torch.Tensor] = F.silu
    ) -> None:
        super().__init__()
        groups = math.gcd(16, dim)
        self.act = activation
        self.conv1 = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=groups)
        self.conv2 = nn.Conv1d(dim, dim, kernel, padding=kernel // 2, groups=groups)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``x [b n c]`` plus the embedding; ``mask [b n]`` the valid frames (None: all)."""
        drop = None if mask is None else ~mask[:, None, :]  # [b 1 n]: masks in the conv layout
        h = self.act(self.conv1(masked(x, mask).transpose(1, 2)))  # [b c n]
        if drop is not None:
            h = h.masked_fill(drop, 0.0)
        h = self.act(self.conv2(h))
        if drop is not None:
            h = h.masked_fill(drop, 0.0)
        return x + h.transpose(1, 2)
