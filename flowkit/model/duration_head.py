"""The duration head of the aligned text path: encoded characters -> log(1 + frames).

Shape legend: b batch, nt characters, dt text channels.

Seed "E11" predicts each character's duration; seed "E13" (``dur_cond = "emotion"``)
conditions it on emotion and intensity through a zero-initialised FiLM, so a parent trained
without it loads unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from flowkit.data.labels import N_RATE_BUCKETS
from flowkit.model.blocks import masked
from flowkit.model.conditioning import EmotionEmbedding
from flowkit.model.conditions import Conditions

__all__ = ["DurationFiLM", "DurationHead"]


class DurationFiLM(nn.Module):
    """Emotion + intensity FiLM of the duration head (seed "E13"): ``h (1 + gamma) + beta``.

    The projection to ``(gamma, beta)`` starts at zero, so a freshly added FiLM leaves the
    durations of a ``dur_cond="none"`` parent unchanged; all its parameters live under
    `flowkit.model.dit.DUR_FILM_PREFIX`.
    """

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.emotion = EmotionEmbedding(hidden)
        self.proj = nn.Linear(hidden, 2 * hidden)
        nn.init.zeros_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def forward(self, h: torch.Tensor, cond: Conditions) -> torch.Tensor:
        gamma, beta = self.proj(F.silu(self.emotion(cond)))[:, None, :].chunk(2, dim=-1)
        return h * (1 + gamma) + beta


class DurationHead(nn.Module):
    """Encoded characters ``[b nt text_dim]`` -> predicted ``log(1 + frames)`` ``[b nt]``.

    Two masked convolutions over the characters (kernel 3: a character's length depends on
    its neighbours), informed by the language and the speaking-rate bucket; with
    ``emotion=True`` a `DurationFiLM` also conditions it on emotion and intensity.
    """

    def __init__(self, text_dim: int, hidden: int, n_languages: int, emotion: bool) -> None:
        super().__init__()
        self.inp = nn.Conv1d(text_dim, hidden, 3, padding=1)
        self.language = nn.Embedding(n_languages + 1, hidden)
        self.rate = nn.Embedding(N_RATE_BUCKETS + 1, hidden)
        for emb in (self.language, self.rate):
            nn.init.normal_(emb.weight, std=0.02)
        self.norm1 = nn.LayerNorm(hidden)
        self.film = DurationFiLM(hidden) if emotion else None
        self.mid = nn.Conv1d(hidden, hidden, 3, padding=1)
        self.norm2 = nn.LayerNorm(hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, chars: torch.Tensor, mask: torch.Tensor, cond: Conditions) -> torch.Tensor:
        h = self.inp(masked(chars, mask).transpose(1, 2)).transpose(1, 2)
        h = h + (self.language(cond.language) + self.rate(cond.rate))[:, None, :]
        h = self.norm1(F.silu(h))
        if self.film is not None:
            h = self.film(h, cond)
        h = h + self.mid(masked(h, mask).transpose(1, 2)).transpose(1, 2)
        h = self.norm2(F.silu(h))
        return self.out(h).squeeze(-1).float().masked_fill(~mask, 0.0)
