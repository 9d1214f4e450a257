"""``criterion.speaker_centroid``: is the voice the speaker its label names?

Each clip is embedded with a speaker encoder (``speaker.resemblyzer``, GE2E; its wheel
ships the weights, ``pip install 'flowkit[eval]'``); each speaker's centroid is the
normalised mean of its clips' embeddings, taken again over the clips nearest to it (the
first centroid is pulled towards clips of other voices wrongly labelled with it; the
second leaves the farthest quarter out). The measure is a clip's cosine distance to its
own speaker's centroid: a clip of another voice lies far from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.curation.criteria.base import Decision, Threshold, by_group, robust_bounds
from flowkit.registry import register

__all__ = ["SpeakerCentroid", "centroid_distances"]

#: the share of a speaker's clips nearest to its first centroid that make the second
CORE_SHARE = 0.75


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def centroid_distances(embeddings: np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """Cosine distance ``[clips]`` of each embedding ``[clips d]`` to the trimmed centroid of
    its label (module docstring); nan for an all-zero embedding (no voice found)."""
    out = np.full(len(labels), np.nan)
    labels = np.asarray(labels)
    valid = np.linalg.norm(embeddings, axis=1) > 0
    for label in sorted(set(labels.tolist())):
        idx = np.flatnonzero((labels == label) & valid)
        if idx.size == 0:
            continue
        units = np.stack([_unit(e) for e in embeddings[idx]])
        centre = _unit(units.mean(axis=0))
        dist = 1.0 - units @ centre
        if idx.size >= 4:
            core = np.argsort(dist, kind="stable")[: max(1, int(np.ceil(CORE_SHARE * idx.size)))]
            centre = _unit(units[core].mean(axis=0))
            dist = 1.0 - units @ centre
        out[idx] = dist
    return out


@register("criterion", "speaker_centroid")
@attrs.define
class SpeakerCentroid:
    """Drops clips far from their speaker's voice (a wrong speaker label, another voice).

    Per speaker (all its languages: one voice), high side: a distance more than ``k``
    robust standard deviations above the speaker's median distance, and above ``floor``,
    drops the clip. ``floor`` 0.25: GE2E puts two clips of one voice at cosine similarity
    0.79-0.94 and two voices at 0.55-0.71 (docs/judges.md); one-second prompts of one voice
    lie up to 0.23 from its centroid, another voice's 0.37 (the bundled demo clips).

    Args:
        judge: a ``speaker`` component; None = ``speaker.resemblyzer``.
        k: robust standard deviations above the speaker's median that flag a clip.
        floor: distances up to this are never flagged.
    """

    judge: Any = None
    k: float = 4.0
    floor: float = 0.25
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
        values = centroid_distances(emb, speakers).tolist()

        def bounds(v: Sequence[float]) -> tuple[float, float, float | None, float | None]:
            return robust_bounds(v, k=self.k, side="high", min_scale=0.01, floor=self.floor)

        def describe(value: float, t: Threshold) -> str:
            return (f"speaker_centroid: cosine distance {value:.3f} to speaker {t.group}'s centroid > {t.high:.3f} "
                    f"(median {t.median:.3f})")

        reasons, thresholds = by_group(speakers, values, bounds, describe)
        unvoiced = sum(not np.isfinite(v) for v in values)
        notes = [f"speaker_centroid: {unvoiced} clips with no voice to embed, not judged"] if unvoiced else []
        return Decision("speaker_centroid", "cosine distance to the speaker's centroid", values, reasons,
                        thresholds, notes)

    def describe(self) -> dict[str, Any]:
        return {"name": "criterion.speaker_centroid", "k": self.k, "floor": self.floor,
                "judge": self.speaker().describe()}
