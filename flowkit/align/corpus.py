"""An aligner's data: every segment of its stores as tokens and normalised latents, in memory.

Latents are normalised per channel by the mean and standard deviation over all frames of
the stores (saved with the aligner's checkpoints, so ``flowkit align write`` normalises as
training did).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from flowkit.align.tokens import Tokens, tokenize
from flowkit.console import Progress

__all__ = ["AlignCorpus", "Batch", "collate", "load_corpus"]

_READ_BLOCK = 256  # segments read per call


@attrs.define
class AlignCorpus:
    """Segments ``i`` of the stores: ``segment_ids[i]``, ``texts[i]``, ``tokens[i]``, ``latents[i]``
    (float32 ``[n d]``, normalised), and the stores' data ``fingerprint``."""

    segment_ids: list[str]
    texts: list[str]
    tokens: list[Tokens]
    latents: list[np.ndarray]
    fingerprint: str

    @property
    def n_frames(self) -> np.ndarray:
        return np.array([len(x) for x in self.latents], dtype=np.int64)

    @property
    def n_tokens(self) -> np.ndarray:
        return np.array([len(t.ids) for t in self.tokens], dtype=np.int64)

    def alignable(self) -> np.ndarray:
        """Indices of the segments with at least one word and no more tokens than frames."""
        ok = (self.n_tokens <= self.n_frames) & np.array([bool(t.words) for t in self.tokens])
        return np.nonzero(ok)[0]


def load_corpus(stores: Sequence[str | Path], vocab_for: Any, stats: dict[str, list[float]] | None = None,
                progress: bool = True) -> tuple[AlignCorpus, Any, dict[str, list[float]]]:
    """Read every segment of ``stores`` (all splits) and tokenize its text.

    Args:
        vocab_for: a vocabulary, or a callable ``(texts, languages) -> vocabulary`` that
            builds one from the stores' texts.
        stats: ``{"mean": [d], "std": [d]}`` to normalise by; None computes them here.

    Returns:
        The corpus, the vocabulary and the stats.

    Raises:
        DataError: a store that cannot be read, or no segment at all.
    """
    from flowkit.data.dataset import LatentDataset
    from flowkit.errors import DataError

    dataset = LatentDataset.open(list(stores), None, min_frames=1)
    try:
        if len(dataset) == 0:
            raise DataError(f"no usable segment in {', '.join(map(str, stores))}: {dataset.why_empty()}")
        segments = list(dataset.segments)
        texts = [s.text for s in segments]
        languages = [s.language for s in segments]
        vocab = vocab_for(texts, languages) if callable(vocab_for) else vocab_for
        latents: list[np.ndarray] = []
        tokens: list[Tokens] = []
        with Progress("read", len(segments), unit="segments", plain_every=10_000, enabled=progress) as bar:
            for start in range(0, len(segments), _READ_BLOCK):
                block = range(start, min(start + _READ_BLOCK, len(segments)))
                latents += dataset.read(list(block))
                tokens += [tokenize(vocab, texts[i], languages[i]) for i in block]
                bar.update(len(block))
        if stats is None:
            total = sum(len(x) for x in latents)
            mean = sum(x.sum(0, dtype=np.float64) for x in latents) / total
            var = sum(((x - mean) ** 2).sum(0, dtype=np.float64) for x in latents) / total
            stats = {"mean": mean.tolist(), "std": np.sqrt(np.maximum(var, 1e-8)).tolist()}
        mean = np.asarray(stats["mean"], dtype=np.float32)
        std = np.asarray(stats["std"], dtype=np.float32)
        latents = [(x - mean) / std for x in latents]
        corpus = AlignCorpus([s.segment_id for s in segments], texts, tokens, latents,
                             content_fingerprint(stores, segments))
    finally:
        dataset.close()
    return corpus, vocab, stats


def content_fingerprint(stores: Sequence[Path], segments: Sequence[Any]) -> str:
    """sha256 of each store's prepare fingerprint and the segments read, in order.

    A store's own fingerprint follows its active timings (`flowkit.data.store.timings`); the
    aligner reads latents and text only, so a store it has written timings into is still the
    data it trained on, and ``flowkit align train`` continues on it (e.g. with more steps).
    """
    from flowkit.data.store import StoreReader

    h = hashlib.sha256()
    for path in stores:
        reader = StoreReader.open(path)
        try:
            h.update(str(reader.attrs.get("prepare_fingerprint", reader.attrs["fingerprint"])).encode() + b"\n")
        finally:
            reader.close()
    for segment in segments:
        h.update(f"{segment.store}\t{segment.segment_id}\n".encode())
    return h.hexdigest()


@attrs.frozen
class Batch:
    """Padded tensors of a batch: tokens int64 ``[b nt]``, token_mask ``[b nt]``, latents
    float32 ``[b n d]``, frame_mask ``[b n]``, n_tokens and n_frames int64 ``[b]``, and the
    corpus indices ``[b]``."""

    tokens: torch.Tensor
    token_mask: torch.Tensor
    latents: torch.Tensor
    frame_mask: torch.Tensor
    n_tokens: torch.Tensor
    n_frames: torch.Tensor
    index: list[int]


def collate(corpus: AlignCorpus, index: Sequence[int]) -> Batch:
    """Pad segments ``index`` of ``corpus`` into a `Batch`."""
    n_tok = torch.tensor([len(corpus.tokens[i].ids) for i in index], dtype=torch.int64)
    n_fr = torch.tensor([len(corpus.latents[i]) for i in index], dtype=torch.int64)
    d = corpus.latents[index[0]].shape[1]
    tokens = torch.zeros(len(index), int(n_tok.max()), dtype=torch.int64)
    latents = torch.zeros(len(index), int(n_fr.max()), d, dtype=torch.float32)
    for k, i in enumerate(index):
        tokens[k, : n_tok[k]] = torch.tensor(corpus.tokens[i].ids)
        latents[k, : n_fr[k]] = torch.from_numpy(corpus.latents[i])
    token_mask = torch.arange(tokens.shape[1])[None, :] < n_tok[:, None]
    frame_mask = torch.arange(latents.shape[1])[None, :] < n_fr[:, None]
    return Batch(tokens, token_mask, latents, frame_mask, n_tok, n_fr, list(index))
