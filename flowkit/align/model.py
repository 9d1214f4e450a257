"""The aligner network and its losses.

Keys from the tokens, queries from the latent frames; frame j's attention over the tokens
is ``softmax_i(-||q_j - k_i||^2 / 2)`` (a unit-variance Gaussian's log-likelihood up to a
constant, as the RAD-TTS aligner scores it), multiplied during training by a static
beta-binomial prior that favours the diagonal. Source: Badlani et al. 2022, "One TTS
Alignment To Rule Them All" (forward-sum loss, prior, binarisation loss).

Shape legend: b batch, n frames, nt tokens, d latent channels, c channels, a attention channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["AlignerNet", "beta_binomial_log_prior", "binarisation_loss", "forward_sum_loss"]

_MASKED = -1e4  # log-score of padding: exp() is 0 in float32, and no inf reaches a gradient


class ConvStack(nn.Module):
    """``layers`` residual blocks of Conv1d -> ReLU -> LayerNorm over ``[b c n]`` (same length)."""

    def __init__(self, channels: int, layers: int, kernel: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, kernel, padding=kernel // 2) for _ in range(layers))
        self.norms = nn.ModuleList(nn.LayerNorm(channels) for _ in range(layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``x`` ``[b c n]``, ``mask`` bool ``[b n]`` -> ``[b c n]`` (zero on padding)."""
        keep = mask[:, None, :].to(x.dtype)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = torch.relu(conv(x * keep))
            x = norm((x + h).transpose(1, 2)).transpose(1, 2)
        return x * keep


class AlignerNet(nn.Module):
    """Tokens ``[b nt]`` and latent frames ``[b n d]`` -> log attention ``[b n nt]``.

    Keys: token embeddings through ``text_layers`` residual convolution blocks, then a
    linear map to ``attn_dim``. Queries: one convolution over the frames (``kernel``
    frames of context), ``frame_layers`` linear layers, a linear map to ``attn_dim``; the
    frame side is kept pointwise after its first layer, as RAD-TTS's query encoder is,
    because it runs over every frame.
    """

    def __init__(self, n_tokens: int, latent_dim: int, channels: int = 128, attn_dim: int = 80,
                 text_layers: int = 3, frame_layers: int = 2, kernel: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_tokens, channels, padding_idx=0)
        self.text = ConvStack(channels, text_layers, kernel)
        self.keys = nn.Linear(channels, attn_dim)
        self.frames_in = nn.Conv1d(latent_dim, channels, kernel, padding=kernel // 2)
        self.frames = nn.Sequential(*[m for _ in range(frame_layers)
                                      for m in (nn.Linear(channels, channels), nn.ReLU())])
        self.queries = nn.Linear(channels, attn_dim)

    def forward(self, tokens: torch.Tensor, token_mask: torch.Tensor, latents: torch.Tensor,
                frame_mask: torch.Tensor, log_prior: torch.Tensor | None = None) -> torch.Tensor:
        """Log attention of each frame over the tokens.

        Args:
            tokens: int ``[b nt]`` (0 padding); token_mask: bool ``[b nt]``.
            latents: float ``[b n d]`` normalised latents; frame_mask: bool ``[b n]``.
            log_prior: float ``[b n nt]`` added to the scores before the softmax, or None.

        Returns:
            float32 ``[b n nt]``: ``log_softmax`` over the valid tokens; padded tokens
            and padded frames hold ``_MASKED``.
        """
        k = self.keys(self.text(self.embed(tokens).transpose(1, 2), token_mask).transpose(1, 2))  # [b nt a]
        h = torch.relu(self.frames_in(latents.transpose(1, 2))).transpose(1, 2)  # [b n c]
        q = self.queries(self.frames(h))  # [b n a]
        dist = q.pow(2).sum(-1)[:, :, None] + k.pow(2).sum(-1)[:, None, :] - 2 * q @ k.transpose(1, 2)  # [b n nt]
        scores = -0.5 * dist.float()
        if log_prior is not None:
            scores = scores + log_prior
        scores = scores.masked_fill(~token_mask[:, None, :], _MASKED)
        log_attn = torch.log_softmax(scores, dim=-1)
        return log_attn.masked_fill(~(frame_mask[:, :, None] & token_mask[:, None, :]), _MASKED)


def beta_binomial_log_prior(n_tokens: torch.Tensor, n_frames: torch.Tensor, nt: int, n: int,
                            scale: float = 1.0) -> torch.Tensor:
    """log P(token i | frame j) of the beta-binomial prior (RAD-TTS, section 3.3).

    For an item of N tokens and T frames, frame j's prior over i in [0, N) is
    BetaBinomial(i; N - 1, a = scale (j + 1), b = scale (T - j)): its mass moves along the
    diagonal. Returns float32 ``[b n nt]`` (``_MASKED`` outside the item).
    """
    # float32: lgamma's rounding (~1e-3 in log units at a few thousand frames) is nothing to a prior
    i = torch.arange(nt, dtype=torch.float32)[None, None, :]
    j = torch.arange(n, dtype=torch.float32)[None, :, None]
    big_n = (n_tokens.to(torch.float32) - 1)[:, None, None]
    t = n_frames.to(torch.float32)[:, None, None]
    a, b = scale * (j + 1), scale * (t - j).clamp(min=1)

    def betaln(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.lgamma(x) + torch.lgamma(y) - torch.lgamma(x + y)

    log_choose = torch.lgamma(big_n + 1) - torch.lgamma(i + 1) - torch.lgamma((big_n - i).clamp(min=0) + 1)
    out = log_choose + betaln(i + a, (big_n - i).clamp(min=0) + b) - betaln(a, b)
    valid = (i < n_tokens[:, None, None]) & (j < n_frames[:, None, None])
    return out.masked_fill(~valid, _MASKED)


def forward_sum_loss(log_attn: torch.Tensor, n_tokens: torch.Tensor, n_frames: torch.Tensor,
                     blank_log_p: float = -1.0) -> torch.Tensor:
    """The forward-sum loss: -log of the attention summed over every monotonic path that
    visits each token in order (CTC with the tokens as the target sequence), per token.

    Args:
        log_attn: float ``[b n nt]`` from `AlignerNet`; n_tokens, n_frames: int ``[b]``.
        blank_log_p: the score of CTC's blank class, which no path of a proper alignment
            uses (RAD-TTS: -1).

    Returns:
        float32 ``[b]``: each item's loss divided by its token count.
    """
    b, n, nt = log_attn.shape
    padded = F.pad(log_attn, (1, 0), value=blank_log_p)  # class 0 = blank
    log_p = torch.log_softmax(padded, dim=-1).transpose(0, 1)  # [n b nt+1]
    targets = torch.arange(1, nt + 1, device=log_attn.device)[None, :].expand(b, nt)
    loss = F.ctc_loss(log_p, targets, n_frames, n_tokens, blank=0, reduction="none", zero_infinity=True)
    return loss / n_tokens.to(loss.dtype)


def binarisation_loss(log_attn: torch.Tensor, path: torch.Tensor) -> torch.Tensor:
    """-mean over the hard path's cells of the soft log attention (RAD-TTS, section 3.4).

    Args:
        log_attn: float ``[b n nt]``; path: 0/1 ``[b nt n]`` from `flowkit.align.search.maximum_path`.

    Returns:
        float32 ``[b]``: per item, the mean over its frames.
    """
    on = path.transpose(1, 2).to(log_attn.dtype)  # [b n nt]
    return -(log_attn * on).sum((1, 2)) / on.sum((1, 2)).clamp(min=1)
