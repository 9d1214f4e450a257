"""From item indices to a model-ready batch: pairing plan, latent reads, collation.

One `BatchBuilder` serves one dataset (training or validation). The data stream
(numpy ``Generator``) is consumed in a fixed order per batch — pairing draws first, then
the CFG-dropout draws inside `collate` — so a batch depends only on its indices and the
stream's state, never on what an earlier batch held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.batching.collate import Batch, CFGDrop, collate
from flowkit.batching.pairing import PairingCounts, needed_indices

__all__ = ["BatchBuilder"]


@attrs.frozen
class BatchBuilder:
    """Builds CPU batches of ``dataset`` (a `flowkit.data.dataset.LatentDataset`).

    Attributes:
        dataset: the segments and their latents.
        pairing: the pairing component (``pairing.in_clip``, ``pairing.cross_segment``).
        stats: latent normalisation (`flowkit.data.stats.LatentStats`).
        vocab: the run's `flowkit.data.text.CharVocab`.
        languages: language names; id ``i + 1`` is ``languages[i]`` (0 = unknown).
        text_path: the model's text path ("unaligned" | "aligned").
        cfg_drop: CFG dropout probabilities (training only).
        row_frames: length of the rows the model packs a batch into (the batch sampler's
            ``row_frames``; None: one row per batch).
    """

    dataset: Any
    pairing: Any
    stats: Any
    vocab: Any
    languages: Sequence[str]
    text_path: str
    cfg_drop: CFGDrop
    row_frames: int | None = None

    def build(self, indices: Sequence[int], rng: np.random.Generator, *, train: bool) -> tuple[Batch, PairingCounts]:
        """The batch of ``indices`` (CPU tensors) and its pairing outcome.

        ``train=False`` (evaluation) draws spans from ``rng`` but no CFG dropout.
        """
        segments = self.dataset.segments
        plans = self.pairing.plan(list(indices), segments, rng)
        needed = needed_indices(plans)
        latents = dict(zip(needed, self.dataset.read(needed), strict=True))
        batch = collate(
            plans, segments, latents, vocab=self.vocab, stats=self.stats, languages=self.languages,
            text_path=self.text_path, cfg_drop=self.cfg_drop, rng=rng if train else None,
            row_frames=self.row_frames,
        )
        return batch, PairingCounts.of(plans)
