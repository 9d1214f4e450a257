"""Self-attention of the DiT: rotary positions, and attention confined to each packed item.

Shape legend: b batch, n frames, T packed frames, h heads, hd head dim, c model dim.

Rotary position embedding after Su et al. 2021 ("RoFormer: Enhanced Transformer with Rotary
Position Embedding"), base 10^4.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowkit.model.packing import PackedIndex

__all__ = ["Attention", "apply_rotary", "rotary_tables", "segment_attention"]


def rotary_tables(n: int, head_dim: int, device: torch.device) -> torch.Tensor:
    """``cos + i sin`` (complex64) ``[n 1 head_dim/2]`` for positions ``0..n-1`` (RoFormer,
    base 10^4), the same rotation for every head."""
    inv = 1.0 / (
        10_000.0 ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    )
    angle = torch.arange(n, device=device, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.complex(torch.cos(angle), torch.sin(angle))[:, None, :]


def apply_rotary(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate the channel pairs ``(x[2j], x[2j+1])`` of ``x [b n h hd]`` by the angles of
    ``table`` (complex, broadcast to ``[b n h hd/2]``, from `rotary_tables`): one complex
    multiply, in float32 for any dtype of ``x``."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * table).flatten(-2).to(x.dtype)


def _varlen_kernel() -> Any:
    """``torch.nn.attention.varlen.varlen_attn`` where this torch has it, else None."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def segment_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, packed: PackedIndex
) -> torch.Tensor:
    """Attention confined to each item of a packed sequence: ``[1 h T hd]`` in and out (any strides).

    On CUDA in half precision one variable-length flash-attention call covers every item
    (cumulative lengths ``packed.cu_seqlens``); elsewhere each item is its own fused
    ``scaled_dot_product_attention`` call without a mask (the flash kernel on the CPU).
    Row padding comes out zero. The sampler stacks ``g`` sequences of the same layout
    (classifier-free guidance's conditional and unconditional pass): ``[g h T hd]``, each
    one attending within itself.
    """
    if q.is_cuda and q.dtype in (torch.float16, torch.bfloat16):
        kernel = _varlen_kernel()
        if kernel is not None:
            outs = []
            for r in range(q.shape[0]):
                qt, kt, vt = (x[r].transpose(0, 1) for x in (q, k, v))  # [T h hd]
                o = kernel(qt, kt, vt, packed.cu_seqlens, packed.cu_seqlens, packed.max_len, packed.max_len)
                outs.append(o.transpose(0, 1))
            return torch.stack(outs)
    outs = []
    for qs, ks, vs, is_item in zip(
        q.split(packed.sizes, 2), k.split(packed.sizes, 2), v.split(packed.sizes, 2), packed.is_item,
        strict=True,
    ):
        if is_item and qs.shape[2]:
            outs.append(F.scaled_dot_product_attention(qs, ks, vs))
        else:
            outs.append(torch.zeros_like(qs))
    return torch.cat(outs, dim=2)


class Attention(nn.Module):
    """Multi-head self-attention with rotary positions, over a padding-free batch ``[b n c]``
    or a packed sequence ``[1 T c]`` (then confined to each item); dropout on its output."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        rope: torch.Tensor,
        packed: PackedIndex | None = None,
    ) -> torch.Tensor:
        """``x [b n c]`` (or packed ``[1 T c]``); ``rope`` the rotary table of its frames
        (`rotary_tables`: ``[n 1|h hd/2]``)."""
        b, n, c = x.shape
        # Heads stay in the frame-major layout [b n h hd] of the projection (SDPA takes the
        # [b h n hd] view of it), so the backward pass stacks the q, k, v gradients straight
        # into the projection's layout instead of stacking them head-major and copying.
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).unbind(2)
        q, k, v = apply_rotary(q, rope).transpose(1, 2), apply_rotary(k, rope).transpose(1, 2), v.transpose(1, 2)
        if packed is None:
            o = F.scaled_dot_product_attention(q, k, v)  # no mask, no dropout: fused kernels
        else:
            o = segment_attention(q, k, v, packed)
        return self.drop(self.out(o.transpose(1, 2).reshape(b, n, c)))
