"""A per-item reference of flowkit's batch building: pairing plans item by item, latents
read one segment at a time through zarr's API, and a collate that pads item by item and
normalises the whole padded batch.

Kept only as the reference `tests/train/test_batch_reference.py` checks the fast path
against: the batches (every tensor), the pairing outcomes and the data stream's state
after each batch must be the same.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
import torch

from flowkit.batching.collate import Batch, CFGDrop
from flowkit.batching.pairing import CrossSegment, InClip, ItemPlan, needed_indices
from flowkit.data.labels import emotion_id
from flowkit.model.conditions import Conditions
from flowkit.model.packing import PackLayout
from flowkit.text.vocabs import encode_text


def _span(n: int, lo: float, hi: float, u_frac: float, u_start: float) -> tuple[int, int]:
    frac = lo + (hi - lo) * u_frac
    length = min(n, max(1, int(round(frac * n))))
    start = min(n - length, int(math.floor(u_start * (n - length + 1))))
    return start, start + length


def _in_clip(index: int, n: int, lo: float, hi: float, u: np.ndarray) -> ItemPlan:
    return ItemPlan(index, _span(n, lo, hi, float(u[0]), float(u[1])), index)


def _members(segments: Any) -> dict[tuple[int, str], list[int]]:
    groups: dict[tuple[int, str], list[int]] = {}
    for i in range(len(segments)):
        seg = segments[i]
        if seg.speaker:
            groups.setdefault((int(seg.corpus), seg.speaker), []).append(i)
    return groups


def _cross(p: CrossSegment, i: int, segments: Any, groups: dict, u: np.ndarray, base: ItemPlan) -> ItemPlan:
    seg = segments[i]
    if not seg.speaker:
        return attrs.evolve(base, fallback="no_speaker")
    others = [j for j in groups[(int(seg.corpus), seg.speaker)] if j != i]
    if not others:
        return attrs.evolve(base, fallback="no_other_segment")
    j = others[min(len(others) - 1, int(u[0] * len(others)))]
    partner = segments[j]
    n_p = int(partner.n_frames)
    want = min(p.min_prompt_frames + int(u[1] * (p.max_prompt_frames - p.min_prompt_frames + 1)), p.max_prompt_frames)
    if n_p < p.min_prompt_frames:
        return attrs.evolve(base, fallback="prompt_too_short")
    if n_p <= p.max_prompt_frames:
        span, chars = (0, n_p), None
    elif not partner.units:
        return attrs.evolve(base, fallback="prompt_too_long")
    else:
        # whole units from a drawn first one, as many as fit in `want` frames (unit ends
        # rise, so the ones that fit are a run from the first)
        units = partner.units
        first = min(len(units) - 1, int(float(u[2]) * len(units)))
        c0, f0 = units[first][0], units[first][2]
        fit = [unit for unit in units[first:] if unit[3] - f0 <= want]
        if not fit or fit[-1][3] - f0 < p.min_prompt_frames:
            return attrs.evolve(base, fallback="prompt_too_short")
        span, chars = (f0, fit[-1][3]), (c0, fit[-1][1])
    return ItemPlan(i, (0, int(seg.n_frames)), j, span, chars, cross=True)


def plan(pairing: InClip | CrossSegment, indices: list[int], segments: Any, rng: np.random.Generator) -> list[ItemPlan]:
    """The plans of ``indices``, one item at a time."""
    u = rng.random((len(indices), pairing.draws_per_item))
    lo, hi = pairing.min_target_frac, pairing.max_target_frac
    plans = []
    groups = _members(segments) if isinstance(pairing, CrossSegment) and pairing.cross_p > 0 else None
    for k, i in enumerate(indices):
        base = _in_clip(int(i), int(segments[i].n_frames), lo, hi, u[k])
        if groups is None or u[k, 2] >= pairing.cross_p:
            plans.append(base)
        else:
            plans.append(_cross(pairing, int(i), segments, groups, u[k, 3:6], base))
    return plans


def read(dataset: Any, indices: list[int]) -> dict[int, np.ndarray]:
    """Latents through zarr's API, one segment at a time, converted by numpy."""
    out = {}
    for i in indices:
        seg = dataset.segments[i]
        reader = dataset._readers[seg.store]
        out[i] = np.asarray(reader._latents[reader.offsets[seg.row] : reader.offsets[seg.row + 1]]).astype(np.float32)
    return out


def _layout(plan: ItemPlan, segments: Any, latents: dict, aligned: bool) -> tuple[np.ndarray, tuple, str, Any]:
    seg = segments[plan.target_index]
    target = latents[plan.target_index]
    if plan.prompt_span is None:
        return target, plan.target_span, seg.text, seg.units
    pseg = segments[plan.prompt_index]
    p0, p1 = plan.prompt_span
    prompt = latents[plan.prompt_index][p0:p1]
    c0, c1 = plan.prompt_chars if plan.prompt_chars is not None else (0, len(pseg.text))
    prompt_text = pseg.text[c0:c1]
    n_p = p1 - p0
    t0, t1 = plan.target_span
    units = None
    if aligned:
        shift = len(prompt_text) + 1
        units = tuple(
            (cs - c0, ce - c0, fs - p0, fe - p0) for cs, ce, fs, fe in pseg.units
            if c0 <= cs and ce <= c1 and p0 <= fs and fe <= p1
        ) + tuple((cs + shift, ce + shift, fs + n_p, fe + n_p) for cs, ce, fs, fe in seg.units)
    return np.concatenate([prompt, target], axis=0), (n_p + t0, n_p + t1), f"{prompt_text} {seg.text}", units


def collate(plans: list[ItemPlan], segments: Any, latents: dict, *, vocab: Any, stats: Any, languages: list[str],
            text_path: str, cfg_drop: CFGDrop, rng: np.random.Generator | None, row_frames: int | None) -> Batch:
    """The batch of ``plans``: padded item by item, the whole padded batch normalised."""
    aligned = text_path == "aligned"
    items = [_layout(p, segments, latents, aligned) for p in plans]
    b, n, d = len(items), max(it[0].shape[0] for it in items), items[0][0].shape[1]
    ids = [encode_text(vocab, it[2], segments[p.target_index].language) for it, p in zip(items, plans, strict=True)]
    nt = max(1, max(len(t) for t in ids))
    x1 = np.zeros((b, n, d), np.float32)
    frame_mask = np.zeros((b, n), bool)
    target_mask = np.zeros((b, n), bool)
    text = np.zeros((b, nt), np.int64)
    text_mask = np.zeros((b, nt), bool)
    for i, (it, t) in enumerate(zip(items, ids, strict=True)):
        m = it[0].shape[0]
        x1[i, :m] = it[0]
        frame_mask[i, :m] = True
        target_mask[i, it[1][0] : it[1][1]] = True
        text[i, : len(t)] = t
        text_mask[i, : len(t)] = True
    x1 = np.asarray(stats.normalize(x1), dtype=np.float32)
    x1[~frame_mask] = 0.0
    prompt = x1 * (frame_mask & ~target_mask)[..., None]
    meta = [segments[p.target_index] for p in plans]
    emotion = np.array([emotion_id(s.emotion) for s in meta], np.int64)
    intensity = np.array([float(s.intensity) if s.emotion and math.isfinite(s.intensity) else 0.0 for s in meta],
                         np.float32)
    lang_index = {name: k + 1 for k, name in enumerate(languages)}
    drop_text, drop_prompt = cfg_drop.draw(b, rng)
    extra: dict[str, torch.Tensor] = {}
    num_chars = int(text_mask.sum())
    if aligned:
        u = max(1, max(len(it[3] or ()) for it in items))
        char_unit = np.full((b, nt), -1, np.int64)
        unit_frames = np.zeros((b, u, 2), np.int64)
        unit_mask = np.zeros((b, u), bool)
        for i, it in enumerate(items):
            for k, (cs, ce, fs, fe) in enumerate(it[3] or ()):
                char_unit[i, cs:ce] = k
                unit_frames[i, k] = (fs, fe)
                unit_mask[i, k] = True
        num_chars = int((char_unit >= 0).sum())
        extra = {"char_unit": torch.from_numpy(char_unit), "unit_frames": torch.from_numpy(unit_frames),
                 "unit_mask": torch.from_numpy(unit_mask)}
    cond = Conditions(
        frame_mask=torch.from_numpy(frame_mask), target_mask=torch.from_numpy(target_mask),
        prompt=torch.from_numpy(prompt), text=torch.from_numpy(text), text_mask=torch.from_numpy(text_mask),
        language=torch.tensor([lang_index.get(s.language, 0) for s in meta], dtype=torch.long),
        emotion=torch.from_numpy(emotion), intensity=torch.from_numpy(intensity),
        emotion_known=torch.from_numpy(emotion > 0),
        rate=torch.tensor([int(s.rate) for s in meta], dtype=torch.long),
        loudness=torch.tensor([int(s.loudness) for s in meta], dtype=torch.long),
        drop_text=torch.from_numpy(drop_text), drop_prompt=torch.from_numpy(drop_prompt),
        layout=PackLayout.plan([it[0].shape[0] for it in items], row_frames), **extra,
    )
    return Batch.of(
        torch.from_numpy(x1), cond, num_target_frames=int(target_mask.sum()),
        num_real_frames=int(frame_mask.sum()), num_chars=num_chars, segment_ids=[s.segment_id for s in meta],
        prompt_segment_ids=[segments[p.prompt_index].segment_id for p in plans],
    )


def build(builder: Any, indices: list[int], rng: np.random.Generator, *, train: bool) -> tuple[Batch, list[ItemPlan]]:
    """What ``builder.build(indices, rng, train=train)`` must build, item by item."""
    segments = builder.dataset.segments
    plans = plan(builder.pairing, list(indices), segments, rng)
    latents = read(builder.dataset, needed_indices(plans))
    batch = collate(plans, segments, latents, vocab=builder.vocab, stats=builder.stats, languages=builder.languages,
                    text_path=builder.text_path, cfg_drop=builder.cfg_drop, rng=rng if train else None,
                    row_frames=builder.row_frames)
    return batch, plans
