"""Embeddings of what conditions every block: the flow time and the per-item conditions.

Shape legend: b batch, c model dim.

The time embedding and the global conditions (language, emotion + intensity, speaking-rate
and loudness buckets) are summed into one vector per item that drives the adaLN-Zero
modulation of every DiT block (Peebles & Xie 2023, "Scalable Diffusion Models with
Transformers").
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from flowkit.data.labels import EMOTIONS, N_LOUDNESS_BUCKETS, N_RATE_BUCKETS
from flowkit.model.conditions import Conditions

__all__ = ["EmotionEmbedding", "GlobalEmbedding", "TimeEmbedding", "sinusoidal_embedding"]

#: F5-TTS feeds t * 1000 to a 256-wide sinusoidal embedding (as DiT does with integer steps).
_TIME_SCALE = 1000.0
_TIME_FREQ_DIM = 256


def sinusoidal_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """``[b dim]`` sin/cos features of ``t [b] * 1000`` (t in [0, 1]); periods up to 10^4."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(10_000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half
    )
    angle = (t.float() * _TIME_SCALE)[:, None] * freqs[None, :]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


class TimeEmbedding(nn.Module):
    """Flow time ``t [b]`` -> ``[b c]``: ``sinusoid(t, 256)`` features (`sinusoidal_embedding`
    by default) and a two-layer MLP."""

    def __init__(
        self, dim: int, sinusoid: Callable[[torch.Tensor, int], torch.Tensor] = sinusoidal_embedding
    ) -> None:
        super().__init__()
        self.sinusoid = sinusoid
        self.mlp = nn.Sequential(nn.Linear(_TIME_FREQ_DIM, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.sinusoid(t, _TIME_FREQ_DIM))


class EmotionEmbedding(nn.Module):
    """Emotion id plus intensity (only where labelled) -> ``[b c]``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.emotion = nn.Embedding(len(EMOTIONS) + 1, dim)
        # Inputs: intensity (0 where unknown) and the known flag, so "unknown" is not "intensity 0".
        self.intensity = nn.Linear(2, dim)

    def forward(self, cond: Conditions) -> torch.Tensor:
        known = cond.emotion_known
        emotion = torch.where(known, cond.emotion, torch.zeros_like(cond.emotion))
        intensity = torch.where(
            known, cond.intensity.float(), torch.zeros_like(cond.intensity, dtype=torch.float32)
        )
        feats = torch.stack([intensity, known.float()], dim=-1)
        return self.emotion(emotion) + self.intensity(feats.to(self.intensity.weight.dtype))


class GlobalEmbedding(nn.Module):
    """Per-item conditions (language, emotion + intensity, rate and loudness buckets) -> ``[b c]``,
    added to the time embedding that drives adaLN."""

    def __init__(self, dim: int, n_languages: int, zero: bool = False) -> None:
        super().__init__()
        self.language = nn.Embedding(n_languages + 1, dim)
        self.emotion = EmotionEmbedding(dim)
        self.rate = nn.Embedding(N_RATE_BUCKETS + 1, dim)
        self.loudness = nn.Embedding(N_LOUDNESS_BUCKETS + 1, dim)
        for emb in (self.language, self.emotion.emotion, self.rate, self.loudness):
            nn.init.normal_(emb.weight, std=0.02)
        if zero:  # exactly no effect until trained (conditions added to an F5-TTS model)
            for param in self.parameters():
                nn.init.zeros_(param)

    def forward(self, cond: Conditions) -> torch.Tensor:
        return (
            self.language(cond.language)
            + self.emotion(cond)
            + self.rate(cond.rate)
            + self.loudness(cond.loudness)
        )
