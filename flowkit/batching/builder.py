"""From item indices to a model-ready batch: pairing plan, latent reads, collation.

One `BatchBuilder` serves one dataset (training or validation). A build has two halves:

- `BatchBuilder.plan` makes every random draw of the batch from the data stream (numpy
  ``Generator``), in a fixed order -- the pairing draws first, then the CFG-dropout draws
  -- and nothing else: it reads no latents. Plans are made one after another, in batch
  order, so the stream's state after batch k depends only on the batches before it.
- `BatchBuilder.assemble` turns a plan into the batch (latent reads, collation). It draws
  nothing, so any number of batches can be assembled at once, in any order, in worker
  threads (`flowkit.batching.prefetch`), and give the same tensors as one thread would.

`build` is both halves in turn: the batch depends only on its indices and the stream's
state, never on what an earlier batch held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.batching.collate import Batch, CFGDrop, collate
from flowkit.batching.pairing import ItemPlan, PairingCounts, needed_indices

__all__ = ["BatchBuilder", "BatchPlan", "CachedSegments"]


class CachedSegments(Sequence[Any]):
    """``segments[i]`` decoded once and kept (a `flowkit.data.dataset.SegmentTable` decodes
    a segment's strings and unit timings at every access, which was a sixth of an e13
    batch build); every other attribute (``n_frames``, ``speaker_keys``) is the table's.

    At most ``limit`` segments are kept (the whole cache is dropped when it is full), so a
    dataset of millions of segments does not grow a million objects. Safe to share between
    threads: a lost race decodes a segment twice, with the same result.
    """

    def __init__(self, segments: Sequence[Any], limit: int = 200_000) -> None:
        self._segments = segments
        self._limit = limit
        self._seen: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._segments)

    def __getitem__(self, index):  # type: ignore[override]
        if not isinstance(index, int | np.integer):
            return self._segments[index]
        i = int(index)
        seg = self._seen.get(i)
        if seg is None:
            if len(self._seen) >= self._limit:
                self._seen = {}
            seg = self._seen[i] = self._segments[i]
        return seg

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._segments, name)


@attrs.frozen
class BatchPlan:
    """Everything random about one batch, drawn by `BatchBuilder.plan`.

    Attributes:
        plans: one `ItemPlan` per item (target and prompt spans).
        drop_text, drop_prompt: bool ``[b]`` CFG dropout flags (all False for evaluation).
    """

    plans: list[ItemPlan]
    drop_text: np.ndarray
    drop_prompt: np.ndarray


@attrs.frozen
class BatchBuilder:
    """Builds CPU batches of ``dataset`` (a `flowkit.data.dataset.LatentDataset`).

    Attributes:
        dataset: the segments and their latents.
        pairing: the pairing component (``pairing.in_clip``, ``pairing.cross_segment``).
        stats: latent normalisation (`flowkit.data.stats.LatentStats`).
        vocab: the run's `flowkit.text.chars.CharVocab`.
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
    segments: CachedSegments = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # a builder made by attrs.evolve (another dataset or pairing) gets a cache of its own
        object.__setattr__(self, "segments", CachedSegments(self.dataset.segments))

    def plan(self, indices: Sequence[int], rng: np.random.Generator, *, train: bool) -> BatchPlan:
        """Every draw of the batch of ``indices`` from ``rng``: pairing, then (``train``)
        CFG dropout; ``train=False`` (evaluation) draws spans but no dropout."""
        plans = self.pairing.plan(list(indices), self.segments, rng)
        drop_text, drop_prompt = self.cfg_drop.draw(len(plans), rng if train else None)
        return BatchPlan(plans, drop_text, drop_prompt)

    def assemble(self, plan: BatchPlan) -> tuple[Batch, PairingCounts]:
        """The batch of ``plan`` (CPU tensors) and its pairing outcome; draws nothing.

        Raises:
            DataError: as `flowkit.batching.collate.collate` (a bad item, a damaged store).
        """
        needed = needed_indices(plan.plans)
        # as stored (float16 for a default store): the batch is normalised where it is used
        latents = dict(zip(needed, self.dataset.read(needed, as_stored=True), strict=True))
        batch = collate(
            plan.plans, self.segments, latents, vocab=self.vocab, stats=self.stats, languages=self.languages,
            text_path=self.text_path, cfg_drop=self.cfg_drop, rng=None, row_frames=self.row_frames,
            drops=(plan.drop_text, plan.drop_prompt),
        )
        return batch, PairingCounts.of(plan.plans)

    def build(self, indices: Sequence[int], rng: np.random.Generator, *, train: bool) -> tuple[Batch, PairingCounts]:
        """The batch of ``indices`` (CPU tensors) and its pairing outcome: `plan`, then
        `assemble`.

        ``train=False`` (evaluation) draws spans from ``rng`` but no CFG dropout.
        """
        return self.assemble(self.plan(indices, rng, train=train))
