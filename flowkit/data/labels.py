"""Label vocabularies shared by prepare, the store and the model conditions.

Every categorical condition reserves id 0 for "unknown", so a segment without a label
still has a valid id and the model learns an "unknown" embedding.

- Emotions: the seven basic categories of Ekman's work as commonly used by emotional
  TTS corpora (ESD, CREMA-D, RAVDESS subsets); ids 1..7 in `EMOTIONS` order.
- Speaking-rate buckets 1..5 (slow..fast) from characters per second of active speech.
- Loudness buckets 1..5 (quiet..loud) from ITU-R BS.1770 integrated loudness (LUFS).

The bucket thresholds are fixed constants (not fitted to a corpus) so that a store built
in several appends, or two stores joined in one dataset, bucket alike. They were chosen
from the measured spread of the asterisk-5voice corpus (docs/data-format.md).
"""

from __future__ import annotations

import bisect
import math

EMOTIONS: tuple[str, ...] = ("neutral", "happy", "sad", "angry", "surprised", "fearful", "disgusted")
N_RATE_BUCKETS = 5
N_LOUDNESS_BUCKETS = 5

#: Upper edges (characters per second, spaces not counted) of rate buckets 1..4; bucket 5 above.
RATE_EDGES_CPS: tuple[float, ...] = (8.0, 11.0, 14.0, 17.0)
#: Upper edges (LUFS) of loudness buckets 1..4; bucket 5 above.
LOUDNESS_EDGES_LUFS: tuple[float, ...] = (-35.0, -27.0, -21.0, -15.0)


def emotion_id(name: str) -> int:
    """Id of emotion ``name`` (1..7), 0 for "" (unknown).

    Raises:
        ValueError: ``name`` is neither "" nor one of `EMOTIONS`.
    """
    key = name.strip().lower()
    if not key:
        return 0
    try:
        return EMOTIONS.index(key) + 1
    except ValueError:
        raise ValueError(f"unknown emotion {name!r}; known: {', '.join(EMOTIONS)} or '' for unknown") from None


def _bucket(value: float, edges: tuple[float, ...]) -> int:
    if value is None or not math.isfinite(value):
        return 0
    return bisect.bisect_right(edges, value) + 1


def rate_bucket(chars_per_second: float) -> int:
    """Speaking-rate bucket 1..5 of ``chars_per_second``; 0 when not finite (unknown)."""
    return _bucket(chars_per_second, RATE_EDGES_CPS)


def loudness_bucket(lufs: float) -> int:
    """Loudness bucket 1..5 of integrated loudness ``lufs``; 0 when not finite (unknown)."""
    return _bucket(lufs, LOUDNESS_EDGES_LUFS)
