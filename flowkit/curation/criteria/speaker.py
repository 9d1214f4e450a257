"""``criterion.speaker_centroid``: is the voice the speaker its label names?

Each clip is embedded with a speaker encoder (``speaker.resemblyzer``, GE2E; its wheel
ships the weights, ``pip install 'flowkit[eval]'``); each speaker's centroid is the
normalised mean of its clips' embeddings, taken again over the clips nearest to it (the
first centroid is pulled towards clips of other voices wrongly labelled with it; the
second leaves the farthest quarter out). Two measures follow: a clip's cosine distance to
its own speaker's centroid, and its *margin*: that distance less the distance to the
nearest other speaker's centroid. A clip of another voice of the corpus under this label
lies nearer that voice's centroid (margin > 0); a clip of this voice, however short and
noisy its embedding, lies nearer its own. Only speakers with at least `MIN_GROUP` embedded
clips count as the other voice: the centroid of two or three clips, one of them mislabelled,
is as near any voice's clips as its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.curation.criteria.base import MIN_GROUP, Decision, Threshold, by_group, robust_bounds
from flowkit.registry import register

__all__ = ["SpeakerCentroid", "centroid_distances", "centroids"]

#: the share of a speaker's clips nearest to its first centroid that make the second
CORE_SHARE = 0.75


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def centroids(embeddings: np.ndarray, labels: Sequence[str]) -> dict[str, np.ndarray]:
    """The trimmed centroid ``[d]`` of each label (module docstring) from ``embeddings [clips d]``;
    all-zero embeddings (no voice found) take no part."""
    labels_arr = np.asarray(labels)
    valid = np.linalg.norm(embeddings, axis=1) > 0
    out = {}
    for label in sorted(set(labels_arr.tolist())):
        idx = np.flatnonzero((labels_arr == label) & valid)
        if idx.size == 0:
            continue
        units = np.stack([_unit(e) for e in embeddings[idx]])
        centre = _unit(units.mean(axis=0))
        if idx.size >= 4:
            dist = 1.0 - units @ centre
            core = np.argsort(dist, kind="stable")[: max(1, int(np.ceil(CORE_SHARE * idx.size)))]
            centre = _unit(units[core].mean(axis=0))
        out[label] = centre
    return out


def centroid_distances(embeddings: np.ndarray, labels: Sequence[str], *,
                       min_clips: int = MIN_GROUP) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per clip: cosine distance to its label's centroid ``[clips]``, the margin (that less
    the distance to the nearest other label's centroid, among labels with at least
    ``min_clips`` embedded clips; nan where there is none) ``[clips]``, and that nearest
    other label (""). nan for an all-zero embedding."""
    cents = centroids(embeddings, labels)
    valid = np.linalg.norm(embeddings, axis=1) > 0 if len(labels) else np.zeros(0, bool)
    counts: dict[str, int] = {}
    for label, ok in zip(labels, valid, strict=True):
        counts[label] = counts.get(label, 0) + int(ok)
    n = len(labels)
    own, margin, nearest = np.full(n, np.nan), np.full(n, np.nan), [""] * n
    for k, (e, label) in enumerate(zip(embeddings, labels, strict=True)):
        if np.linalg.norm(e) == 0 or label not in cents:
            continue
        u = _unit(e)
        own[k] = 1.0 - float(u @ cents[label])
        others = {other: 1.0 - float(u @ c) for other, c in cents.items()
                  if other != label and counts.get(other, 0) >= min_clips}
        if others:
            nearest[k] = min(others, key=lambda o: others[o])
            margin[k] = own[k] - others[nearest[k]]
    return own, margin, nearest


@register("criterion", "speaker_centroid")
@attrs.define
class SpeakerCentroid:
    """Drops clips of another voice than their label's.

    Two rules, either drops: the clip lies nearer another speaker's centroid than its own
    by more than ``max_margin`` (a wrong label among the corpus's voices); or its distance
    to its own speaker's centroid is more than ``k`` robust standard deviations above the
    speaker's median and above ``floor`` (a voice the corpus has no label for; the only rule
    with one speaker). ``max_margin`` 0: a clip of a voice lies nearer its own centroid
    (clean clips of the shared corpus: margin -0.34 to +0.02, 3 of 599 above 0; clips
    relabelled to another of its speakers: +0.04 to +0.31). ``floor`` 0.4: one-second
    prompts of one voice lie up to 0.35 from its centroid.

    Args:
        judge: a ``speaker`` component; None = ``speaker.resemblyzer``.
        max_margin: the largest (own - nearest other) centroid distance kept.
        k: robust standard deviations above the speaker's median distance that flag a clip.
        floor: distances up to this are never flagged by the distance rule.
    """

    judge: Any = None
    max_margin: float = 0.0
    k: float = 4.0
    floor: float = 0.4
    _speaker: Any = attrs.field(default=None, init=False, repr=False, eq=False)

    def speaker(self) -> Any:
        """The speaker encoder in use (built once)."""
        if self._speaker is None:
            if self.judge is not None:
                self._speaker = self.judge
            else:
                from flowkit import registry

                registry.load_plugins()
                self._speaker = registry.build("speaker", "resemblyzer")
        return self._speaker

    def measure(self, clip: Any) -> dict[str, Any]:
        emb = np.asarray(self.speaker().embed(clip.audio, clip.sample_rate), dtype=np.float32)
        return {"speaker_embedding": [round(float(v), 6) for v in emb]}

    def decide(self, clips: Sequence[Any], measures: Sequence[Mapping[str, Any]]) -> Decision:
        rows = [m.get("speaker_embedding") for m in measures]
        dim = next((len(r) for r in rows if r), 1)
        emb = np.stack([np.asarray(r, dtype=np.float64) if r else np.zeros(dim) for r in rows]) if rows \
            else np.zeros((0, dim))
        speakers = [c.speaker for c in clips]
        own, margin, nearest = centroid_distances(emb, speakers)

        def bounds(v: Sequence[float]) -> tuple[float, float, float | None, float | None]:
            return robust_bounds(v, k=self.k, side="high", min_scale=0.01, floor=self.floor)

        def describe(value: float, t: Threshold) -> str:
            return (f"speaker_centroid: cosine distance {value:.3f} to speaker {t.group}'s centroid > {t.high:.3f} "
                    f"(median {t.median:.3f})")

        reasons, thresholds = by_group(speakers, own.tolist(), bounds, describe)
        for k in range(len(clips)):
            if np.isfinite(margin[k]) and margin[k] > self.max_margin and reasons[k] is None:
                reasons[k] = (f"speaker_centroid: nearer speaker {nearest[k]}'s centroid than {speakers[k]}'s "
                              f"(distances {own[k] - margin[k]:.3f} and {own[k]:.3f})")
        plotted = margin if np.isfinite(margin).any() else own
        if np.isfinite(margin).any():
            def median_margin(group: str) -> float:  # nan for a speaker none of whose clips has a margin
                found = [m for s, m in zip(speakers, margin, strict=True) if s == group and np.isfinite(m)]
                return float(np.median(found)) if found else float("nan")

            thresholds = [Threshold(t.group, median_margin(t.group), 0.0, None, self.max_margin, t.clips)
                          for t in thresholds]
        unvoiced = sum(not np.isfinite(v) for v in own)
        notes = [f"speaker_centroid: {unvoiced} clips with no voice to embed, not judged"] if unvoiced else []
        label = ("distance to own speaker's centroid less that to the nearest other's" if np.isfinite(margin).any()
                 else "cosine distance to the speaker's centroid")
        return Decision("speaker_centroid", label, plotted.tolist(), reasons, thresholds, notes)

    def describe(self) -> dict[str, Any]:
        return {"name": "criterion.speaker_centroid", "max_margin": self.max_margin, "k": self.k,
                "floor": self.floor, "judge": self.speaker().describe()}
