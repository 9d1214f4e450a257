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

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import torch

from flowkit.batching.pairing import ItemPlan
from flowkit.data.labels import emotion_id
from flowkit.data.text import encode_text
from flowkit.errors import ConfigError, DataError
from flowkit.model.conditions import Conditions
from flowkit.model.packing import PackLayout

__all__ = ["TEXT_PATHS", "Batch", "CFGDrop", "collate"]

TEXT_PATHS = ("unaligned", "aligned")


class _Vocab(Protocol):
    def encode(self, text: str) -> list[int]: ...


class _Stats(Protocol):
    def normalize(self, x: Any) -> Any: ...


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
class Batch:
    """A training or evaluation batch, ready for the model.

    Attributes:
        x1: float32 ``[b n d]``, normalised clean latents (zeros on padding).
        cond: the model `Conditions` (masks, prompt, text, labels, CFG flags).
        num_target_frames: frames of all target spans (the flow loss's unit).
        num_real_frames: non-padding frames.
        num_chars: real characters; on the aligned path only those inside a unit
            (the duration loss's unit).
        segment_ids: ``segment_id`` of each item's target segment.
        prompt_segment_ids: ``segment_id`` of each item's prompt segment (the target
            segment itself for an in-clip prompt).
    """

    x1: torch.Tensor
    cond: Conditions
    num_target_frames: int
    num_real_frames: int
    num_chars: int
    segment_ids: list[str]
    prompt_segment_ids: list[str] = attrs.Factory(list)

    @property
    def batch_size(self) -> int:
        return int(self.x1.shape[0])

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Batch:
        """The same batch on ``device`` (asynchronous copies from pinned memory with
        ``non_blocking``)."""
        return attrs.evolve(
            self, x1=self.x1.to(device, non_blocking=non_blocking),
            cond=self.cond.to(device, non_blocking=non_blocking),
        )

    def pin_memory(self) -> Batch:
        """The same batch in page-locked CPU memory (CUDA only: the copies to the device then
        overlap with compute)."""
        return attrs.evolve(self, x1=self.x1.pin_memory(), cond=self.cond.pin_memory())


@attrs.frozen
class _Item:
    latents: np.ndarray  # [n d] as stored (normalised once for the whole batch in collate)
    target: tuple[int, int]
    text: str
    # (char_start, char_end, frame_start, frame_end) in the item's own layout, or None.
    units: tuple[tuple[int, int, int, int], ...] | None


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
    segments: Sequence[Any],
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
        return _Item(target, plan.target_span, seg.text, seg.units)

    pseg = segments[plan.prompt_index]
    p0, p1 = plan.prompt_span
    prompt = _latents(latents_by_index, plan.prompt_index, pseg)[p0:p1]
    c0, c1 = plan.prompt_chars if plan.prompt_chars is not None else (0, len(pseg.text))
    prompt_text = pseg.text[c0:c1]
    n_p = p1 - p0
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
        np.concatenate([prompt, target], axis=0),
        (n_p + t0, n_p + t1),
        f"{prompt_text} {seg.text}",
        units,
    )


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
) -> Batch:
    """Assemble the `Batch` of ``plans``.

    Args:
        plans: one `ItemPlan` per item (from a pairing's ``plan``).
        segments: the dataset's `SegmentInfo` list (indexed by the plans' indices).
        latents_by_index: raw (un-normalised) latents ``[n_frames d]`` of every index the
            plans name (`flowkit.batching.pairing.needed_indices`).
        vocab: character vocabulary (``encode(text) -> ids``, 0 = padding).
        stats: latent statistics; ``stats.normalize`` is applied to the batch's valid frames.
        languages: the model's language list; id = position + 1, 0 for a language not in it.
        text_path: ``"unaligned"`` or ``"aligned"`` (adds ``char_unit``, ``unit_frames``,
            ``unit_mask`` from the segments' unit timings).
        cfg_drop: CFG dropout probabilities; ``cfg_drop.draws_per_item`` uniforms per item
            are drawn from ``rng``.
        rng: the data stream; None for evaluation (no CFG dropout, nothing drawn).
        row_frames: rows the model packs the items into (`flowkit.model.packing.PackLayout`,
            planned here on the CPU and carried in ``cond.layout``); None: one row.

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
    aligned = text_path == "aligned"
    items = [_layout(p, segments, latents_by_index, aligned) for p in plans]
    b = len(items)
    n = max(it.latents.shape[0] for it in items)
    d = items[0].latents.shape[1]
    ids = [encode_text(vocab, it.text, segments[p.target_index].language) for it, p in zip(items, plans, strict=True)]
    nt = max(1, max(len(t) for t in ids))

    x1 = np.zeros((b, n, d), np.float32)
    frame_mask = np.zeros((b, n), bool)
    target_mask = np.zeros((b, n), bool)
    text = np.zeros((b, nt), np.int64)
    text_mask = np.zeros((b, nt), bool)
    for i, (it, t) in enumerate(zip(items, ids, strict=True)):
        m = it.latents.shape[0]
        if it.latents.shape[1] != d:
            raise DataError(
                f"segment {segments[plans[i].target_index].segment_id}: latent dim "
                f"{it.latents.shape[1]} != {d} of the batch's other items"
            )
        x1[i, :m] = it.latents
        frame_mask[i, :m] = True
        target_mask[i, it.target[0] : it.target[1]] = True
        text[i, : len(t)] = t
        text_mask[i, : len(t)] = True
    # One normalisation of the whole batch (float32: stores may hold float16, whose
    # precision the normalised values would lose), then padding back to exactly zero; the
    # same element-wise (x - mean) / std as per item, at a fraction of the cost.
    x1 = np.asarray(stats.normalize(x1), dtype=np.float32)
    x1[~frame_mask] = 0.0
    prompt = x1 * (frame_mask & ~target_mask)[..., None]

    meta = [segments[p.target_index] for p in plans]
    emotion = np.zeros(b, np.int64)
    for i, s in enumerate(meta):
        try:
            emotion[i] = emotion_id(s.emotion)
        except ValueError as exc:
            raise DataError(f"segment {s.segment_id}: {exc}") from None
    intensity = np.array(
        [float(s.intensity) if s.emotion and math.isfinite(s.intensity) else 0.0 for s in meta],
        np.float32,
    )
    lang_index = {name: k + 1 for k, name in enumerate(languages)}
    drop_text, drop_prompt = cfg_drop.draw(b, rng)

    extra: dict[str, torch.Tensor] = {}
    num_chars = int(text_mask.sum())
    if aligned:
        char_unit, unit_frames, unit_mask = _unit_tensors(items, ids, plans, segments, nt)
        num_chars = int((char_unit >= 0).sum())
        extra = {
            "char_unit": torch.from_numpy(char_unit),
            "unit_frames": torch.from_numpy(unit_frames),
            "unit_mask": torch.from_numpy(unit_mask),
        }

    cond = Conditions(
        frame_mask=torch.from_numpy(frame_mask),
        target_mask=torch.from_numpy(target_mask),
        prompt=torch.from_numpy(prompt),
        text=torch.from_numpy(text),
        text_mask=torch.from_numpy(text_mask),
        language=torch.tensor([lang_index.get(s.language, 0) for s in meta], dtype=torch.long),
        emotion=torch.from_numpy(emotion),
        intensity=torch.from_numpy(intensity),
        emotion_known=torch.from_numpy(emotion > 0),
        rate=torch.tensor([int(s.rate) for s in meta], dtype=torch.long),
        loudness=torch.tensor([int(s.loudness) for s in meta], dtype=torch.long),
        drop_text=torch.from_numpy(drop_text),
        drop_prompt=torch.from_numpy(drop_prompt),
        layout=PackLayout.plan([it.latents.shape[0] for it in items], row_frames),
        **extra,
    )
    return Batch(
        x1=torch.from_numpy(x1),
        cond=cond,
        num_target_frames=int(target_mask.sum()),
        num_real_frames=int(frame_mask.sum()),
        num_chars=num_chars,
        segment_ids=[s.segment_id for s in meta],
        prompt_segment_ids=[segments[p.prompt_index].segment_id for p in plans],
    )


def _unit_tensors(
    items: Sequence[_Item],
    ids: Sequence[list[int]],
    plans: Sequence[ItemPlan],
    segments: Sequence[Any],
    nt: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``char_unit [b nt]`` (-1 outside units and on padding), ``unit_frames [b u 2]``,
    ``unit_mask [b u]`` of the aligned path."""
    b = len(items)
    u = max(1, max(len(it.units or ()) for it in items))
    char_unit = np.full((b, nt), -1, np.int64)
    unit_frames = np.zeros((b, u, 2), np.int64)
    unit_mask = np.zeros((b, u), bool)
    for i, it in enumerate(items):
        n = it.latents.shape[0]
        for k, (cs, ce, fs, fe) in enumerate(it.units or ()):
            if not (0 <= cs <= ce <= len(ids[i]) and 0 <= fs <= fe <= n):
                seg = segments[plans[i].target_index]
                raise DataError(
                    f"segment {seg.segment_id}: unit {k} spans characters {cs}:{ce} and frames "
                    f"{fs}:{fe}, outside its {len(ids[i])} characters / {n} frames (is the text "
                    "NFC-normalised as the vocabulary expects?)"
                )
            char_unit[i, cs:ce] = k
            unit_frames[i, k] = (fs, fe)
            unit_mask[i, k] = True
    return char_unit, unit_frames, unit_mask
