"""Collation: item plans + latents + metadata -> one padded, masked training `Batch`.

Shape legend: b batch, n latent frames, d latent channels, nt characters, u units (words).

Every item is laid out left-aligned and padded on the right to the longest item of the
batch. An in-clip item is its own segment; a cross-segment item (E12) is
``[prompt frames | target segment frames]`` with the text ``prompt text + " " + target
text`` and, on the aligned path, the unit timings of both shifted to that layout. Padding
never changes an item's values (tested), so a batch's loss does not depend on its
neighbours.

Classifier-free guidance (CFG) dropout is only *flagged* here (``cond.drop_text``,
``cond.drop_prompt``): the model hides what is flagged, so evaluation passes can flip the
flags on the same batch.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import torch

from flowkit.batching.pairing import ItemPlan
from flowkit.data.labels import emotion_condition, language_id
from flowkit.data.stats import LatentStats
from flowkit.errors import ConfigError, DataError
from flowkit.model.conditions import TEXT_PATHS, Conditions, ItemError
from flowkit.model.packing import PackLayout
from flowkit.text.vocabs import encode_text

__all__ = ["Batch", "CFGDrop", "LatentNorm", "collate"]


class _Vocab(Protocol):
    def encode(self, text: str) -> list[int]: ...


class _Stats(Protocol):
    def normalize_(self, x: np.ndarray) -> np.ndarray: ...


@attrs.frozen
class CFGDrop:
    """Per-item CFG dropout probabilities: text alone, prompt alone, or both together.

    Defaults follow F5-TTS: the audio prompt is dropped with p = 0.3 and, independently,
    text and prompt together with p = 0.2 (which trains the unconditional branch that
    guidance subtracts); text alone is not dropped. Each item always draws three uniforms
    ``(both, prompt, text)``, whatever the probabilities, so changing one probability
    never shifts the random stream.
    """

    text_p: float = 0.0
    prompt_p: float = 0.3
    both_p: float = 0.2

    draws_per_item = 3

    def __attrs_post_init__(self) -> None:
        for name in ("text_p", "prompt_p", "both_p"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ConfigError(f"CFGDrop.{name}={p} must be in [0, 1]")

    def draw(self, n: int, rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
        """``(drop_text [n], drop_prompt [n])`` bool; no draw and no drop when ``rng`` is None."""
        if rng is None:
            return np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        u = rng.random((n, self.draws_per_item))
        both = u[:, 0] < self.both_p
        return both | (u[:, 2] < self.text_p), both | (u[:, 1] < self.prompt_p)


@attrs.frozen
class LatentNorm:
    """The normalisation ``(x - mean) / std`` in float32, per channel, applied where a
    batch is used (on the training device) instead of where it is built.

    Attributes:
        mean, std: float32 ``[d]``.
    """

    mean: torch.Tensor
    std: torch.Tensor

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> LatentNorm:
        return LatentNorm(self.mean.to(device, non_blocking=non_blocking),
                          self.std.to(device, non_blocking=non_blocking))

    def __call__(self, latents: torch.Tensor, frame_mask: torch.Tensor) -> torch.Tensor:
        """float32 ``[b n d]``: ``latents`` ``[b n d]`` (float16 or float32) normalised on the
        frames of ``frame_mask`` ``[b n]``, zero on padding. The same element-wise float32
        operations as `flowkit.data.stats.LatentStats.normalize_`, so the same bits."""
        x = latents.to(torch.float32, copy=True)
        x.sub_(self.mean).div_(self.std)
        return x.masked_fill_(~frame_mask[..., None], 0.0)


@attrs.frozen
class Batch:
    """A training or evaluation batch, ready for the model.

    The batch is built on the CPU as the store holds it -- ``latents`` in the store's dtype
    (float16 for a default store) and ``conditions`` without the prompt -- and finished
    where it is used: `x1` (normalised by ``norm``) and `cond` (with the prompt, which is
    ``x1`` off the target span) are made on first access, on the device the batch was moved
    to with `to`. So a batch crosses to the device at a quarter of the bytes of two float32
    ``[b n d]`` arrays, and the build threads do none of that arithmetic
    (docs/performance.md, "Batch building").

    Attributes:
        latents: ``[b n d]`` latents as stored (float16 or float32), zero on padding; float32
            and already normalised when ``norm`` is None.
        conditions: the model `Conditions` but for the prompt (``prompt`` None), or
            complete (prompt given) for a batch made by `Batch.of`.
        norm: the latent normalisation (`LatentNorm`); None: ``latents`` are normalised.
        num_target_frames: frames of all target spans (the flow loss's unit).
        num_real_frames: non-padding frames.
        num_chars: real characters; on the aligned path only those inside a unit
            (the duration loss's unit).
        segment_ids: ``segment_id`` of each item's target segment.
        prompt_segment_ids: ``segment_id`` of each item's prompt segment (the target
            segment itself for an in-clip prompt).
    """

    latents: torch.Tensor
    conditions: Conditions
    norm: LatentNorm | None
    num_target_frames: int
    num_real_frames: int
    num_chars: int
    segment_ids: list[str]
    prompt_segment_ids: list[str] = attrs.Factory(list)

    @classmethod
    def of(cls, x1: torch.Tensor, cond: Conditions, **counts: Any) -> Batch:
        """A batch of normalised ``x1`` float32 ``[b n d]`` and complete conditions ``cond``."""
        return cls(latents=x1, conditions=cond, norm=None, **counts)

    @functools.cached_property
    def x1(self) -> torch.Tensor:
        """float32 ``[b n d]``, normalised clean latents (zeros on padding), on the batch's device."""
        if self.norm is None:
            return self.latents
        return self.norm(self.latents, self.conditions.frame_mask)

    @functools.cached_property
    def cond(self) -> Conditions:
        """The model `Conditions`; ``prompt`` float32 ``[b n d]`` is `x1` outside the target
        span, zero on it and on padding."""
        if self.conditions.prompt is not None:
            return self.conditions
        return self.conditions.replace(prompt=self.x1.masked_fill(self.conditions.target_mask[..., None], 0.0))

    @property
    def batch_size(self) -> int:
        return int(self.latents.shape[0])

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Batch:
        """The same batch on ``device`` (asynchronous copies from pinned memory with
        ``non_blocking``); `x1` and `cond` are made there. The batch itself when it is on
        ``device`` already (what it made is kept)."""
        if self.latents.device == torch.device(device):
            return self
        return attrs.evolve(
            self, latents=self.latents.to(device, non_blocking=non_blocking),
            conditions=self.conditions.to(device, non_blocking=non_blocking),
            norm=self.norm.to(device, non_blocking=non_blocking) if self.norm is not None else None,
        )

    def pin_memory(self) -> Batch:
        """The same batch in page-locked CPU memory (CUDA only: the copies to the device then
        overlap with compute)."""
        return attrs.evolve(self, latents=self.latents.pin_memory(), conditions=self.conditions.pin_memory())


@attrs.frozen
class _Item:
    parts: tuple[np.ndarray, ...]  # [n_k d] frames as read, laid end to end (prompt, then target)
    n: int  # frames of the item
    target: tuple[int, int]
    text: str
    # (char_start, char_end, frame_start, frame_end) in the item's own layout, or None.
    units: tuple[tuple[int, int, int, int], ...] | None


class _Segments:
    """``segments[i]`` built once per collate call (a `flowkit.data.dataset.SegmentTable`
    decodes a segment's strings and units at every access)."""

    def __init__(self, segments: Sequence[Any]) -> None:
        self._segments = segments
        self._seen: dict[int, Any] = {}

    def __getitem__(self, index: int) -> Any:
        seg = self._seen.get(index)
        if seg is None:
            seg = self._seen[index] = self._segments[index]
        return seg


def _latents(latents_by_index: Mapping[int, np.ndarray], index: int, seg: Any) -> np.ndarray:
    try:
        x = latents_by_index[index]
    except KeyError:
        raise DataError(
            f"collate: no latents for item {index} (segment {seg.segment_id}); read "
            "flowkit.batching.pairing.needed_indices(plans)"
        ) from None
    if x.ndim != 2 or x.shape[0] != seg.n_frames:
        raise DataError(
            f"segment {seg.segment_id}: latents of shape {tuple(x.shape)} but n_frames="
            f"{seg.n_frames}; the store and its index disagree (re-run flowkit prepare)"
        )
    return x


def _layout(
    plan: ItemPlan,
    segments: _Segments,
    latents_by_index: Mapping[int, np.ndarray],
    aligned: bool,
) -> _Item:
    seg = segments[plan.target_index]
    target = _latents(latents_by_index, plan.target_index, seg)
    if aligned and not seg.units:
        raise DataError(
            f"segment {seg.segment_id} has no unit timings but text_path='aligned'; load the "
            "dataset with require_units=True or prepare it with timings"
        )
    if plan.prompt_span is None:
        return _Item((target,), target.shape[0], plan.target_span, seg.text, seg.units)

    pseg = segments[plan.prompt_index]
    p0, p1 = plan.prompt_span
    prompt = _latents(latents_by_index, plan.prompt_index, pseg)[p0:p1]
    c0, c1 = plan.prompt_chars if plan.prompt_chars is not None else (0, len(pseg.text))
    prompt_text = pseg.text[c0:c1]
    n_p = prompt.shape[0]
    t0, t1 = plan.target_span
    units = None
    if aligned:
        if not pseg.units:
            raise DataError(
                f"prompt segment {pseg.segment_id} has no unit timings but text_path='aligned'"
            )
        shift = len(prompt_text) + 1
        units = tuple(
            (cs - c0, ce - c0, fs - p0, fe - p0)
            for cs, ce, fs, fe in pseg.units
            if c0 <= cs and ce <= c1 and p0 <= fs and fe <= p1
        ) + tuple((cs + shift, ce + shift, fs + n_p, fe + n_p) for cs, ce, fs, fe in seg.units)
    return _Item(
        (prompt, target),
        n_p + target.shape[0],
        (n_p + t0, n_p + t1),
        f"{prompt_text} {seg.text}",
        units,
    )


def _float32_stats(stats: Any, d: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """float32 ``(mean [d], std [d])`` of a `LatentStats` (whose ``normalize_`` is
    ``(x - mean) / std`` in float32 for a float32 array), or ``(None, None)`` for statistics
    of another kind, whose own ``normalize_`` is then called."""
    if not isinstance(stats, LatentStats) or stats.mean.shape != (d,):
        return None, None
    return stats.mean.astype(np.float32), stats.std.astype(np.float32)


def collate(
    plans: Sequence[ItemPlan],
    segments: Sequence[Any],
    latents_by_index: Mapping[int, np.ndarray],
    *,
    vocab: _Vocab,
    stats: _Stats,
    languages: Sequence[str],
    text_path: str,
    cfg_drop: CFGDrop,
    rng: np.random.Generator | None,
    row_frames: int | None = None,
    drops: tuple[np.ndarray, np.ndarray] | None = None,
) -> Batch:
    """Assemble the `Batch` of ``plans``.

    The padded latents are allocated once and filled an item at a time with slice copies,
    in the dtype the latents come in (float16 when every item's are float16; otherwise
    float32); they are normalised where the batch is used (`Batch.x1`: the same
    element-wise ``(x - mean) / std`` in float32 as ``stats.normalize_``), except for
    statistics of another kind than `LatentStats`, whose ``normalize_`` runs here on each
    item's frames. The masks, text, labels and unit tensors are `Conditions.stack`'s (array
    operations). `torch.from_numpy` shares every array (no copy).

    Args:
        plans: one `ItemPlan` per item (from a pairing's ``plan``).
        segments: the dataset's `SegmentInfo` list (indexed by the plans' indices).
        latents_by_index: raw (un-normalised) latents ``[n_frames d]`` of every index the
            plans name (`flowkit.batching.pairing.needed_indices`), float32 (as
            `LatentDataset.read` returns them) or float16.
        vocab: character vocabulary (``encode(text) -> ids``, 0 = padding).
        stats: latent statistics (`flowkit.data.stats.LatentStats`: its float32 mean and
            std become the batch's `LatentNorm`; another kind's ``normalize_`` is applied in
            place to the batch's valid frames).
        languages: the model's language list; id = position + 1, 0 for a language not in it.
        text_path: ``"unaligned"`` or ``"aligned"`` (adds ``char_unit``, ``unit_frames``,
            ``unit_mask`` from the segments' unit timings).
        cfg_drop: CFG dropout probabilities; ``cfg_drop.draws_per_item`` uniforms per item
            are drawn from ``rng``.
        rng: the data stream; None for evaluation (no CFG dropout, nothing drawn).
        row_frames: rows the model packs the items into (`flowkit.model.packing.PackLayout`,
            planned here on the CPU and carried in ``cond.layout``); None: one row.
        drops: ``(drop_text [b], drop_prompt [b])`` drawn beforehand
            (`flowkit.batching.builder.BatchBuilder.plan`); ``rng`` must then be None.

    Raises:
        ConfigError: unknown ``text_path``.
        DataError: missing latents or latents that disagree with ``n_frames``, an unknown
            emotion label, or (aligned) a segment without unit timings or with a unit outside
            its text.
    """
    if text_path not in TEXT_PATHS:
        raise ConfigError(f"text_path={text_path!r}: use one of {', '.join(TEXT_PATHS)}")
    if not plans:
        raise DataError("collate: empty batch")
    if drops is not None and rng is not None:
        raise ValueError("collate: give the CFG drops or the rng to draw them from, not both")
    aligned = text_path == "aligned"
    segs = _Segments(segments)
    items = [_layout(p, segs, latents_by_index, aligned) for p in plans]
    meta = [segs[p.target_index] for p in plans]
    b = len(items)
    frames = np.fromiter((it.n for it in items), np.int64, count=b)
    n = int(frames.max())
    d = items[0].parts[-1].shape[1]
    if aligned and hasattr(vocab, "encode_units"):
        # a front end whose tokens are not the text's characters (phonemes) re-indexes the units
        encoded = [vocab.encode_units(it.text, it.units or (), s.language) for it, s in zip(items, meta, strict=True)]
        ids = [e[0] for e in encoded]
        items = [attrs.evolve(it, units=e[1]) for it, e in zip(items, encoded, strict=True)]
    else:
        ids = [encode_text(vocab, it.text, s.language) for it, s in zip(items, meta, strict=True)]

    # every element is written once below (no zero fill first). The latents stay as stored
    # (float16 for a default store: half the bytes to copy and to move to the device); the
    # normalisation and the prompt are made where the batch is used (`Batch.x1`, `Batch.cond`).
    mean, std = _float32_stats(stats, d)
    stored = mean is not None and all(part.dtype == np.float16 for it in items for part in it.parts)
    latents = np.empty((b, n, d), np.float16 if stored else np.float32)
    for i, it in enumerate(items):
        at = 0
        for part in it.parts:
            if part.shape[1] != d:
                segment_id, dim = meta[i].segment_id, part.shape[1]
                raise DataError(f"segment {segment_id}: latent dim {dim} != {d} of the batch's other items")
            latents[i, at : at + part.shape[0]] = part
            at += part.shape[0]
        latents[i, at:] = 0.0
        if mean is None:  # statistics of another kind normalise here, with their own normalize_
            stats.normalize_(latents[i, :at])
    emotions = []
    for s in meta:
        try:
            emotions.append(emotion_condition(s.emotion, s.intensity))
        except ValueError as exc:
            raise DataError(f"segment {s.segment_id}: {exc}") from None
    try:
        cond = Conditions.stack(
            frames, [it.target for it in items], ids, emotions=emotions,
            language=[language_id(languages, s.language) for s in meta],
            rate=[int(s.rate) for s in meta], loudness=[int(s.loudness) for s in meta],
            drops=cfg_drop.draw(b, rng) if drops is None else drops,
            units=[it.units for it in items] if aligned else None, layout=PackLayout.plan(frames.tolist(), row_frames))
    except ItemError as exc:
        raise DataError(f"segment {meta[exc.item].segment_id}: {exc.message} (is the text NFC-normalised as the "
                        "vocabulary expects?)") from None
    norm = None if mean is None else LatentNorm(torch.from_numpy(mean), torch.from_numpy(std))
    return Batch(
        latents=torch.from_numpy(latents),
        conditions=cond,
        norm=norm,
        num_target_frames=int(np.count_nonzero(cond.target_mask.numpy())),
        num_real_frames=int(frames.sum()),
        num_chars=int(np.count_nonzero(cond.char_unit.numpy() >= 0 if aligned else cond.text_mask.numpy())),
        segment_ids=[s.segment_id for s in meta],
        prompt_segment_ids=[segs[p.prompt_index].segment_id for p in plans],
    )

