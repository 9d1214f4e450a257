"""Rotary position embedding: the complex-table rotation of channel pairs."""

from __future__ import annotations

import torch

from flowkit.interop.f5_network import rotary_tables_on_heads
from flowkit.model.attention import apply_rotary, rotary_tables


def _rotate_pairs(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Reference: each channel pair (2j, 2j+1) of ``x [b n h hd]`` rotated by ``angle [n hd/2]``."""
    a, b = x[..., 0::2], x[..., 1::2]
    cos, sin = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)


def test_rotary_rotates_channel_pairs_by_position():
    n, hd = 11, 8
    x = torch.randn(2, n, 3, hd)
    inv = 1.0 / 10_000.0 ** (torch.arange(0, hd, 2).float() / hd)
    angle = torch.arange(n).float()[:, None] * inv[None, :]
    torch.testing.assert_close(apply_rotary(x, rotary_tables(n, hd, x.device)), _rotate_pairs(x, angle))
    # Only the first head rotates (F5-TTS's pe_attn_head = 1); the others are exact copies.
    out = apply_rotary(x, rotary_tables_on_heads(n, hd, 3, 1, x.device))
    torch.testing.assert_close(out[:, :, 0], _rotate_pairs(x, angle)[:, :, 0])
    assert torch.equal(out[:, :, 1:], x[:, :, 1:])


def test_rotary_scores_depend_on_the_distance_only():
    hd = 16
    table = rotary_tables(40, hd, torch.device("cpu"))
    q, k = torch.randn(1, 1, 1, hd).expand(1, 40, 1, hd), torch.randn(1, 1, 1, hd).expand(1, 40, 1, hd)
    rq, rk = apply_rotary(q, table)[0, :, 0], apply_rotary(k, table)[0, :, 0]
    torch.testing.assert_close(rq[5] @ rk[2], rq[33] @ rk[30], rtol=1e-4, atol=1e-5)
    assert not torch.allclose(rq[5] @ rk[2], rq[5] @ rk[3])
