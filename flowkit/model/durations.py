"""Characters on frames for the aligned text path (seed "E11"), and duration bookkeeping.

Shape legend: b batch, n frames, nt characters, u units (words).

Unit ``k`` of an item spans frames ``unit_frames[k, 0] : unit_frames[k, 1]`` and owns the
characters whose ``char_unit`` is ``k``; those characters are a contiguous run of the
text (a word), and characters outside every unit (``-1``: spaces, punctuation between
words) get no frames. A unit's frames are divided among its characters in proportion to
per-character weights: the predicted durations while training (``phase="predicted"``) or
equal weights at inference (``phase="even"``, where no true timing exists).

Durations are in frames; the duration head predicts ``log(1 + d)``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import torch

from flowkit.model.conditions import Conditions

__all__ = [
    "char_duration_targets",
    "char_units_from_ids",
    "durations_from_log",
    "in_unit_chars",
    "place_chars",
    "unit_frames_from_durations",
]

#: Smallest weight of a character in the placement: a character predicted to last 0 frames
#: still competes (all-zero predictions in a unit fall back to an even split).
_MIN_WEIGHT = 1e-3


def durations_from_log(log_duration: torch.Tensor) -> torch.Tensor:
    """Durations in frames (>= 0) from predicted ``log(1 + d)`` (any shape)."""
    return torch.expm1(log_duration.float()).clamp_min(0.0)


def in_unit_chars(
    char_unit: torch.Tensor, text_mask: torch.Tensor, unit_mask: torch.Tensor
) -> torch.Tensor:
    """bool ``[b nt]``: real characters that belong to a real unit."""
    unit = char_unit.clamp_min(0)
    return text_mask & (char_unit >= 0) & torch.gather(unit_mask, 1, unit)


def _unit_layout(
    cond: Conditions,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(unit [b nt], valid [b nt], start [b u], length [b u])`` of the unit timings.

    ``unit`` is ``char_unit`` with -1 clamped to 0 (an index for gather/scatter; ``valid``
    says which characters really belong to a unit); ``start`` and ``length`` are float
    frames (``length`` >= 0).

    Raises:
        ValueError: the conditions carry no unit timings.
    """
    if cond.char_unit is None or cond.unit_frames is None or cond.unit_mask is None:
        raise ValueError(
            "the aligned text path needs unit timings: Conditions.char_unit, unit_frames and "
            "unit_mask must be set (load the data with require_units=True)"
        )
    valid = in_unit_chars(cond.char_unit, cond.text_mask, cond.unit_mask)
    frames = cond.unit_frames
    length = (frames[..., 1] - frames[..., 0]).clamp_min(0).float()
    return cond.char_unit.clamp_min(0), valid, frames[..., 0].float(), length


def _pause_layout(
    cond: Conditions, unit: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(before [b nt] long, pause [b nt] bool)``: the last unit before each character
    (-1 before the first), and which characters are separators between two real units
    (``unit``, ``valid`` from `_unit_layout`)."""
    marked = torch.where(valid, unit, torch.full_like(unit, -1))
    before = torch.cummax(marked, dim=1).values
    n_units = cond.unit_mask.sum(1, keepdim=True)
    pause = cond.text_mask & ~valid & (before >= 0) & (before + 1 < n_units)
    return before, pause


def char_duration_targets(cond: Conditions) -> tuple[torch.Tensor, torch.Tensor]:
    """Duration-loss targets: ``log(1 + L_u / m_u)`` for each character of unit ``u``, and
    ``log(1 + P_k / s_k)`` for each separator character between units ``k`` and ``k + 1``.

    ``L_u`` is the unit's length in frames and ``m_u`` its number of characters, so every
    character of a unit has the unit's mean character duration (the data has timings per
    word, not per character). ``P_k`` is the pause between the two units (frames from the
    end of ``k`` to the start of ``k + 1``, usually 0) and ``s_k`` the number of separator
    characters between them (the space, a comma and a space...): the duration head learns
    where a speaker pauses, and synthesis leaves those frames silent
    (`unit_frames_from_durations`). Characters before the first or after the last unit get
    no target (the silence at the edges of a clip is not the text's).

    Returns:
        ``(target [b nt] float32, mask [b nt] bool)``; the mask keeps real characters that
        are in a unit or between two units; the target is 0 elsewhere.

    Raises:
        ValueError: the conditions carry no unit timings.
    """
    unit, valid, start, length = _unit_layout(cond)
    chars = torch.zeros_like(length).scatter_add_(1, unit, valid.float())
    mean = length / chars.clamp_min(1.0)
    target = torch.log1p(torch.gather(mean, 1, unit))
    before, pause = _pause_layout(cond, unit, valid)
    k = before.clamp_min(0)
    end = start + length
    next_start = torch.cat([start[:, 1:], start[:, -1:]], dim=1)
    gap = (next_start - end).clamp_min(0.0)
    seps = torch.zeros_like(length).scatter_add_(1, k, pause.float())
    pause_target = torch.log1p(torch.gather(gap / seps.clamp_min(1.0), 1, k))
    target = torch.where(valid, target, torch.where(pause, pause_target, torch.zeros_like(target)))
    return target, valid | pause


def place_chars(cond: Conditions, weights: torch.Tensor | None) -> torch.Tensor:
    """Which character each frame shows: float ``[b n nt]``, one-hot over characters on the
    frames of a unit, all-zero on frames outside units and on padding.

    Unit ``u`` of ``L`` frames starting at ``s`` gives character ``j`` the frames whose
    centres fall in ``[s + L c_j / W, s + L (c_j + w_j) / W)``, with ``w_j`` the weight of
    the character, ``c_j`` the weights of the unit's earlier characters and ``W`` their
    sum. ``weights [b nt]`` are durations in frames (only their ratios inside a unit
    matter); ``None`` splits every unit evenly.

    Raises:
        ValueError: the conditions carry no unit timings.
    """
    unit, valid, start, length = _unit_layout(cond)
    if weights is None:
        w = valid.float()
    else:
        w = torch.where(
            valid,
            weights.float().clamp_min(_MIN_WEIGHT),
            torch.zeros_like(weights, dtype=torch.float32),
        )
    total = torch.zeros_like(length).scatter_add_(1, unit, w)
    # Cumulative weight inside a unit: the running sum over the text minus its value just
    # before the unit's first character (out-of-unit characters weigh 0, units are runs).
    before = torch.cumsum(w, dim=1) - w
    inf = torch.full_like(before, float("inf"))
    offset = torch.full_like(total, float("inf")).scatter_reduce_(
        1, unit, torch.where(valid, before, inf), reduce="amin", include_self=True
    )
    lo = before - torch.gather(offset, 1, unit).nan_to_num(posinf=0.0)
    scale = torch.gather(length, 1, unit) / torch.gather(total, 1, unit).clamp_min(1e-12)
    first = torch.gather(start, 1, unit) + lo * scale
    last = first + w * scale
    centres = torch.arange(cond.num_frames, device=w.device, dtype=torch.float32) + 0.5
    on = (centres[None, :, None] >= first[:, None, :]) & (centres[None, :, None] < last[:, None, :])
    on = on & valid[:, None, :] & cond.frame_mask[:, :, None]
    return on.float()


def char_units_from_ids(ids: Sequence[int], separator_ids: Collection[int]) -> list[int]:
    """Unit index of each character when units are runs of non-separator characters.

    ``separator_ids`` (e.g. the id of " ") get ``-1``; each maximal run of other characters
    is one unit, numbered from 0.
    """
    out: list[int] = []
    unit, inside = -1, False
    for c in ids:
        if c in separator_ids:
            out.append(-1)
            inside = False
        else:
            if not inside:
                unit += 1
                inside = True
            out.append(unit)
    return out


def unit_frames_from_durations(
    log_duration: torch.Tensor,
    char_unit: Sequence[int],
    *,
    start: int = 0,
    total: int | None = None,
    silence: str = "edges",
) -> list[tuple[int, int]]:
    """Consecutive unit timings of one item from its predicted character durations.

    Each unit lasts the sum of its characters' predicted durations (``log_duration [nt]``,
    ``log(1 + d)`` in frames), at least one frame; between units ``k`` and ``k + 1`` lies
    the pause predicted for the separator characters between them (rounded, often 0
    frames: `char_duration_targets`). The first unit starts at frame ``start``. ``total``
    (frames) is the span the units must fit in:

    - ``silence="edges"`` (the default): units and pauses that fit keep their predicted
      lengths and the frames left over are split evenly before the first and after the
      last unit.
      Those frames belong to no unit, as the silence around the words of every training
      clip does (the model shows them its learned gap embedding). Units and pauses that
      do not fit are scaled down to fill ``total`` exactly.
    - ``silence="none"``: no pauses, and the units are scaled to fill ``total`` exactly
      (no frame outside a unit; the words stretch over the silence).

    Scaled lengths are rounded cumulatively, so no frame is lost or doubled.

    Returns:
        ``[(frame_start, frame_end), ...]`` per unit (end exclusive), in unit order.

    Raises:
        ValueError: ``silence`` is neither "edges" nor "none".
    """
    if silence not in ("edges", "none"):
        raise ValueError(f"silence = {silence!r}; use 'edges' or 'none'")
    d = durations_from_log(log_duration.detach().cpu()).tolist()
    n_units = max(char_unit, default=-1) + 1
    if n_units == 0:
        return []
    lengths = [0.0] * n_units
    pauses = [0.0] * n_units  # pauses[k]: silence between unit k and unit k + 1
    last = -1
    for j, u in enumerate(char_unit):
        if u >= 0:
            lengths[u] += d[j]
            last = u
        elif 0 <= last < n_units - 1:
            pauses[last] += d[j]
    lengths = [max(1.0, x) for x in lengths]
    if silence == "none":
        pauses = [0.0] * n_units
    pauses[-1] = 0.0
    # the item as alternating spans: unit 0, pause 0, unit 1, ... (pauses may be 0 frames)
    spans = [x for pair in zip(lengths, pauses, strict=True) for x in pair][:-1]
    rounded = [max(1, round(x)) if i % 2 == 0 else round(x) for i, x in enumerate(spans)]
    if total is not None and (silence == "none" or sum(rounded) > total):
        whole = sum(spans)
        acc_f, bounds = 0.0, []
        for x in spans:
            acc_f += x
            bounds.append(start + round(total * acc_f / whole))
    else:
        if total is not None:  # centre the words: the frames left are silence at both edges
            start += (total - sum(rounded)) // 2
        bounds, acc = [], start
        for x in rounded:
            acc += x
            bounds.append(acc)
    edges = [start, *bounds]
    return [(edges[2 * k], edges[2 * k + 1]) for k in range(n_units)]
