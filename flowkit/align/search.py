"""Monotonic alignment search (MAS; Kim et al. 2020, Glow-TTS, section 3.1).

The dynamic program runs in the ``monotonic-alignment-search`` package (the Glow-TTS
authors' Cython kernel, MIT licence); this module fixes flowkit's shapes and masks around it.
Every token receives at least one frame, every frame exactly one token, tokens in order.

Shape legend: b batch, n frames, nt tokens.
"""

from __future__ import annotations

import torch

__all__ = ["maximum_path"]

_FLOOR = -1e9  # what masked cells score: finite, so the kernel's value * mask stays a number


def maximum_path(log_p: torch.Tensor, n_tokens: torch.Tensor, n_frames: torch.Tensor) -> torch.Tensor:
    """The monotonic path of largest total score.

    Args:
        log_p: float ``[b n nt]`` score of frame j on token i (e.g. a log-probability).
        n_tokens: int ``[b]`` valid tokens per item; n_frames: int ``[b]`` valid frames.

    Returns:
        int64 ``[b nt n]``: 1 where frame j is given to token i, 0 elsewhere and on padding.

    Raises:
        ValueError: an item with more tokens than frames (no path gives each token a frame).
    """
    from monotonic_alignment_search import maximum_path as mas

    if bool((n_tokens > n_frames).any()):
        k = int(torch.nonzero(n_tokens > n_frames)[0, 0])
        raise ValueError(f"item {k} has {int(n_tokens[k])} tokens for {int(n_frames[k])} frames: no monotonic path")
    b, n, nt = log_p.shape
    mask = (torch.arange(nt)[None, :, None] < n_tokens.cpu()[:, None, None]) & (
        torch.arange(n)[None, None, :] < n_frames.cpu()[:, None, None])
    value = log_p.detach().float().cpu().transpose(1, 2).clamp(min=_FLOOR).contiguous()
    path = mas(value, mask.float(), implementation="cython")
    return path.to(torch.int64)
