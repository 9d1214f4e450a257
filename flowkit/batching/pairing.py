"""Prompt pairing: which frames of a training item are the prompt and which the target span.

Infilling TTS (F5-TTS, E2-TTS) learns to generate a hidden *target span* given the rest of
the clip as an audio *prompt*. At inference the prompt is a *different* utterance of the
speaker, which the in-clip scheme never shows the model; the cross-segment pairing (seed
"E12") closes that gap by sometimes taking the prompt from another segment of the same
speaker.

Randomness contract. ``plan`` draws exactly ``draws_per_item * len(batch)`` uniforms from
the generator it is given, in one call, whatever the items turn out to be (fallbacks,
ineligible items and all). A batch's randomness therefore never depends on what an
earlier batch contained, and a resumed run draws the same numbers as the uninterrupted
one. ``cross_segment`` with ``cross_p == 0`` draws exactly what ``in_clip`` draws and
returns identical plans.

Layout of a cross-segment item (see `flowkit.batching.collate`): ``[prompt frames | target
segment frames]``, the text ``prompt text + " " + target text``; the whole target segment
is the target span, as when synthesising new text after a reference clip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from flowkit.errors import ConfigError
from flowkit.registry import register

__all__ = [
    "FALLBACK_REASONS",
    "CrossSegment",
    "InClip",
    "ItemPlan",
    "PairingCounts",
    "needed_indices",
]

#: Why an item chosen for a cross-segment prompt kept its in-clip prompt.
FALLBACK_REASONS: dict[str, str] = {
    "no_speaker": "the segment has no speaker label",
    "no_other_segment": "no other segment of the same (corpus, speaker)",
    "prompt_too_short": "the chosen partner (or unit window) has fewer than min_prompt_frames",
    "prompt_too_long": "the partner exceeds max_prompt_frames and has no unit timings to cut it",
}


class _Segment(Protocol):
    """The fields of `flowkit.data.dataset.SegmentInfo` that pairing reads."""

    store: int
    corpus: int  # the --data path it came from: speakers are grouped within one
    speaker: str
    text: str
    n_frames: int
    units: tuple[tuple[int, int, int, int], ...] | None


@attrs.frozen
class ItemPlan:
    """Prompt and target span of one batch item.

    Attributes:
        target_index: dataset index of the segment whose frames are generated.
        target_span: ``(start, end)`` frames of the target span in the target segment
            (end exclusive).
        prompt_index: dataset index of the prompt segment (``target_index`` for in-clip).
        prompt_span: ``(start, end)`` frames of the prompt in the prompt segment; None for
            in-clip (the prompt is every target-segment frame outside the target span).
        prompt_chars: ``(start, end)`` characters of the prompt segment's text spoken in
            ``prompt_span``; None for in-clip or when the whole prompt segment is used.
        cross: whether the prompt comes from another segment.
        fallback: why an item chosen for a cross-segment prompt kept the in-clip one
            (a key of `FALLBACK_REASONS`), else None.
    """

    target_index: int
    target_span: tuple[int, int]
    prompt_index: int
    prompt_span: tuple[int, int] | None = None
    prompt_chars: tuple[int, int] | None = None
    cross: bool = False
    fallback: str | None = None

    @property
    def prompt_frames(self) -> int:
        """Frames of a cross-segment prompt (0 for in-clip)."""
        return 0 if self.prompt_span is None else self.prompt_span[1] - self.prompt_span[0]


@attrs.define
class PairingCounts:
    """Pairing outcomes: items planned, cross-segment prompts given, fallbacks by reason."""

    items: int = 0
    given: int = 0
    fallbacks: dict[str, int] = attrs.Factory(dict)

    @classmethod
    def of(cls, plans: Sequence[ItemPlan]) -> PairingCounts:
        counts = cls(items=len(plans), given=sum(1 for p in plans if p.cross))
        for p in plans:
            if p.fallback is not None:
                counts.fallbacks[p.fallback] = counts.fallbacks.get(p.fallback, 0) + 1
        return counts

    @property
    def num_fallbacks(self) -> int:
        return sum(self.fallbacks.values())

    @property
    def cross_frac(self) -> float:
        """Share of items that got a cross-segment prompt."""
        return self.given / self.items if self.items else 0.0

    @property
    def fallback_frac(self) -> float:
        """Of the items chosen for a cross-segment prompt, the share that fell back."""
        chosen = self.given + self.num_fallbacks
        return self.num_fallbacks / chosen if chosen else 0.0

    def add(self, other: PairingCounts) -> None:
        """Accumulate ``other`` into these counts."""
        self.items += other.items
        self.given += other.given
        for reason, n in other.fallbacks.items():
            self.fallbacks[reason] = self.fallbacks.get(reason, 0) + n

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "given": self.given,
            "fallbacks": dict(sorted(self.fallbacks.items())),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PairingCounts:
        return cls(
            int(d["items"]), int(d["given"]), {str(k): int(v) for k, v in d["fallbacks"].items()}
        )


def needed_indices(plans: Sequence[ItemPlan]) -> list[int]:
    """Sorted dataset indices whose latents `collate` needs for ``plans`` (targets and prompts)."""
    return sorted({i for p in plans for i in (p.target_index, p.prompt_index)})


def _check_frac_range(owner: str, lo: float, hi: float) -> None:
    if not 0.0 < lo <= hi <= 1.0:
        raise ConfigError(
            f"{owner}: need 0 < min_target_frac <= max_target_frac <= 1, got "
            f"min_target_frac={lo}, max_target_frac={hi}"
        )


def _spans(n: np.ndarray, lo: float, hi: float, u: np.ndarray) -> tuple[list[int], list[int]]:
    """Target spans ``(starts, ends)`` of ``round(frac * n)`` frames (at least 1), placed
    uniformly, for lengths ``n`` int64 ``[b]`` and uniforms ``u`` ``[b >=2]`` (``u[:, 0]``
    the fraction, ``u[:, 1]`` the start).

    Array arithmetic in float64, the same operations in the same order as the scalar
    ``frac = lo + (hi - lo) * u0; length = min(n, max(1, round(frac * n))); start =
    min(n - length, floor(u1 * (n - length + 1)))`` (``np.rint`` rounds half to even like
    Python's ``round``), so the spans are those of a per-item loop.
    """
    frac = lo + (hi - lo) * u[:, 0]
    length = np.minimum(n, np.maximum(1, np.rint(frac * n).astype(np.int64)))
    start = np.minimum(n - length, np.floor(u[:, 1] * (n - length + 1)).astype(np.int64))
    return start.tolist(), (start + length).tolist()


def _frames_of(segments: Sequence[_Segment], indices: Sequence[int]) -> np.ndarray:
    """int64 ``[b]`` frames of ``segments[indices]`` (from the ``n_frames`` column when there is one)."""
    column = getattr(segments, "n_frames", None)
    if isinstance(column, np.ndarray):
        return column[np.asarray(indices, dtype=np.int64)].astype(np.int64, copy=False)
    return np.asarray([segments[i].n_frames for i in indices], dtype=np.int64)


def _frames(segments: Sequence[_Segment], i: int) -> int:
    """Frames of ``segments[i]`` (from the ``n_frames`` column when there is one)."""
    column = getattr(segments, "n_frames", None)
    return int(column[i]) if isinstance(column, np.ndarray) else int(segments[i].n_frames)


def _in_clip_plans(
    batch_indices: Sequence[int], segments: Sequence[_Segment], lo: float, hi: float, u: np.ndarray
) -> list[ItemPlan]:
    indices = [int(i) for i in batch_indices]
    starts, ends = _spans(_frames_of(segments, indices), lo, hi, u)
    return [ItemPlan(i, (a, b), i) for i, a, b in zip(indices, starts, ends, strict=True)]


@register("pairing", "in_clip")
@attrs.frozen
class InClip:
    """The prompt is the rest of the clip; the target span is a random part of it.

    The span covers a fraction of the segment drawn uniformly from
    ``[min_target_frac, max_target_frac]`` (at least one frame) and is placed uniformly;
    with a fraction of 1 the whole clip is generated without prompt. Two uniforms per item.
    """

    # F5-TTS masks 70-100 % of each clip (its frac_lengths_mask).
    min_target_frac: float = 0.7
    max_target_frac: float = 1.0

    def __attrs_post_init__(self) -> None:
        _check_frac_range("pairing.in_clip", self.min_target_frac, self.max_target_frac)

    @property
    def draws_per_item(self) -> int:
        return 2

    def cross_pass(self) -> None:
        """None: in-clip pairing never takes a prompt from another segment."""
        return None

    def budget_lengths(self, segments: Sequence[_Segment]) -> np.ndarray:
        """Frames each item occupies in a batch, int64 ``[N]``: its own length."""
        return segment_frames(segments)

    def plan(
        self, batch_indices: Sequence[int], segments: Sequence[_Segment], rng: np.random.Generator
    ) -> list[ItemPlan]:
        """One `ItemPlan` per index; draws ``2 * len(batch_indices)`` uniforms from ``rng``."""
        u = rng.random((len(batch_indices), self.draws_per_item))
        return _in_clip_plans(batch_indices, segments, self.min_target_frac, self.max_target_frac, u)


@attrs.frozen
class _Groups:
    """Dataset indices grouped by ``(corpus, speaker)``; built once per segment list."""

    segments: Sequence[_Segment]
    key_of: np.ndarray  # int64 [N]: the group of each segment, -1 without a speaker
    members: dict[int, np.ndarray]  # int64, ascending


def segment_frames(segments: Sequence[_Segment]) -> np.ndarray:
    """int64 ``[N]`` frames of each segment (a dataset's column when it has one)."""
    column = getattr(segments, "n_frames", None)
    if isinstance(column, np.ndarray):
        return column.astype(np.int64, copy=False)
    return np.asarray([s.n_frames for s in segments], dtype=np.int64)


def speaker_groups(segments: Sequence[_Segment]) -> tuple[np.ndarray, dict[int, list[int]]]:
    """Each segment's ``(corpus, speaker)`` group key (int64 ``[N]``, -1 without a speaker)
    and the members of every group; array work when ``segments`` has ``speaker_keys``."""
    if hasattr(segments, "speaker_keys"):
        keys = np.asarray(segments.speaker_keys(), dtype=np.int64)
    else:
        ids: dict[tuple[int, str], int] = {}
        keys = np.asarray([ids.setdefault((int(s.corpus), s.speaker), len(ids)) if s.speaker else -1 for s in segments],
                          dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    cuts = np.nonzero(np.diff(sorted_keys))[0] + 1
    members: dict[int, list[int]] = {}
    for part in np.split(order, cuts):  # stable sort: each group's indices ascending
        if part.size and keys[part[0]] >= 0:
            members[int(keys[part[0]])] = part.tolist()
    return keys, members


@register("pairing", "cross_segment")
@attrs.frozen
class CrossSegment:
    """With probability ``cross_p`` the prompt is another segment of the same speaker (E12).

    A chosen item draws a partner among the other segments of its ``(corpus, speaker)``
    group (speakers are only comparable within a store) and a prompt of
    ``[min_prompt_frames, max_prompt_frames]`` frames from it: the whole partner when it
    fits, otherwise a window of whole units (so the prompt text is known exactly);
    a partner too long without unit timings, or too short, falls back to the in-clip
    prompt and is counted by reason (`FALLBACK_REASONS`). Items not chosen, and
    fallbacks, use the in-clip target span ``[min_target_frac, max_target_frac]``.

    Every item that has a partner reserves ``max_prompt_frames`` in the batch budget
    (`budget_lengths`), so the batch fits whichever items end up paired.

    Draws per item: 2 (target span) with ``cross_p == 0``, else 6 (target span, choice,
    partner, prompt length, prompt start).
    """

    cross_p: float = 0.5  # 0 disables the pairing (identical to pairing.in_clip)
    # Frames at the store's frame rate; 32..256 frames is about 0.3..2.7 s at F5-TTS's
    # 93.75 Hz mel rate: long enough to carry the voice, short next to the target.
    min_prompt_frames: int = 32
    max_prompt_frames: int = 256
    min_target_frac: float = 0.7
    max_target_frac: float = 1.0
    _cache: dict[str, _Groups] = attrs.field(
        init=False, factory=dict, eq=False, repr=False, hash=False
    )

    def __attrs_post_init__(self) -> None:
        if not 0.0 <= self.cross_p <= 1.0:
            raise ConfigError(f"pairing.cross_segment.cross_p={self.cross_p} must be in [0, 1]")
        if not 1 <= self.min_prompt_frames <= self.max_prompt_frames:
            raise ConfigError(
                "pairing.cross_segment: need 1 <= min_prompt_frames <= max_prompt_frames, got "
                f"{self.min_prompt_frames} and {self.max_prompt_frames}"
            )
        _check_frac_range("pairing.cross_segment", self.min_target_frac, self.max_target_frac)

    @property
    def draws_per_item(self) -> int:
        return 2 if self.cross_p == 0 else 6

    def _groups(self, segments: Sequence[_Segment]) -> _Groups:
        cached = self._cache.get("groups")
        # Identity, not equality: holding the list keeps its id from being reused.
        if cached is not None and cached.segments is segments:
            return cached
        keys, members = speaker_groups(segments)
        groups = _Groups(segments, keys, {k: np.asarray(v, dtype=np.int64) for k, v in members.items()})
        self._cache["groups"] = groups
        return groups

    def eligible(self, segments: Sequence[_Segment]) -> np.ndarray:
        """bool ``[N]``: items with at least one other segment of their (corpus, speaker)."""
        out = np.zeros(len(segments), dtype=bool)
        if self.cross_p == 0:
            return out
        for idx in self._groups(segments).members.values():
            if len(idx) > 1:
                out[idx] = True
        return out

    def cross_pass(self) -> CrossSegment:
        """This pairing with ``cross_p = 1`` (every item asks for a cross-segment prompt;
        fallbacks keep the in-clip one), for the cross-segment validation pass."""
        return attrs.evolve(self, cross_p=1.0)

    def budget_lengths(self, segments: Sequence[_Segment]) -> np.ndarray:
        """Frames each item occupies, int64 ``[N]``: its length plus ``max_prompt_frames``
        for items that can be paired (nothing extra with ``cross_p == 0``)."""
        lengths = segment_frames(segments)
        return lengths + self.eligible(segments).astype(np.int64) * self.max_prompt_frames

    def plan(
        self, batch_indices: Sequence[int], segments: Sequence[_Segment], rng: np.random.Generator
    ) -> list[ItemPlan]:
        """One `ItemPlan` per index; draws ``draws_per_item * len(batch_indices)`` uniforms."""
        u = rng.random((len(batch_indices), self.draws_per_item))
        plans = _in_clip_plans(batch_indices, segments, self.min_target_frac, self.max_target_frac, u)
        if self.cross_p == 0:
            return plans
        groups = self._groups(segments)
        for k in np.flatnonzero(u[:, 2] < self.cross_p).tolist():
            plans[k] = self._cross(plans[k].target_index, segments, groups, u[k, 3:6], plans[k])
        return plans

    def _cross(
        self, i: int, segments: Sequence[_Segment], groups: _Groups, u: np.ndarray, base: ItemPlan
    ) -> ItemPlan:
        key = int(groups.key_of[i])
        if key < 0:
            return attrs.evolve(base, fallback="no_speaker")
        members = groups.members[key]
        n_others = members.shape[0] - 1  # every member but i itself
        if not n_others:
            return attrs.evolve(base, fallback="no_other_segment")
        pick = min(n_others - 1, int(u[0] * n_others))  # position among the others (i left out)
        j = int(members[pick + (pick >= int(np.searchsorted(members, i)))])
        n_p = _frames(segments, j)
        want = self.min_prompt_frames + int(
            u[1] * (self.max_prompt_frames - self.min_prompt_frames + 1)
        )
        want = min(want, self.max_prompt_frames)
        if n_p < self.min_prompt_frames:
            return attrs.evolve(base, fallback="prompt_too_short")
        if n_p <= self.max_prompt_frames:
            span, chars = (0, n_p), None
        else:
            units = segments[j].units
            if not units:
                return attrs.evolve(base, fallback="prompt_too_long")
            window = self._unit_window(units, want, float(u[2]))
            if window is None:
                return attrs.evolve(base, fallback="prompt_too_short")
            span, chars = window
        n_t = _frames(segments, i)
        return ItemPlan(i, (0, n_t), j, span, chars, cross=True)

    def _unit_window(
        self, units: Sequence[tuple[int, int, int, int]], want: int, u_start: float
    ) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """Consecutive whole units from a uniformly drawn first unit, up to ``want`` frames;
        ``((frame_start, frame_end), (char_start, char_end))`` or None when shorter than
        ``min_prompt_frames``."""
        first = min(len(units) - 1, int(u_start * len(units)))
        c0, _, f0, _ = units[first]
        last = None
        for k in range(first, len(units)):
            if units[k][3] - f0 > want:
                break
            last = k
        if last is None or units[last][3] - f0 < self.min_prompt_frames:
            return None
        return (f0, units[last][3]), (c0, units[last][1])
