"""The clips a curation judges: read as `flowkit prepare` reads its inputs.

A source is anything prepare takes (`flowkit.data.importers`): an LJSpeech-style folder
with ``metadata.csv``, a flowkit manifest, LibriTTS, Lhotse or Hugging Face data. Lines an
importer rejects (no audio file, a bad column) are not clips: prepare would reject them
too, and the curation lists them with their reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from flowkit.data.manifest import Item, Rejection

__all__ = ["CURATION_RATE", "ClipAudio", "ClipInfo", "info_of", "load_clip", "read_source"]

#: Hz: the judges run at 16 kHz (Whisper, DNSMOS, the GE2E encoder); clips are decoded at it once
CURATION_RATE = 16000


@attrs.frozen
class ClipInfo:
    """What the source says of one clip (nothing decoded)."""

    segment_id: str
    text: str
    speaker: str
    language: str
    audio: str  # the audio file, or the importer's description of where the audio lies

    @property
    def group(self) -> str:
        """``speaker/language``: whose statistics a clip is compared with (a voice reads
        another language at another rate)."""
        return f"{self.speaker}/{self.language}" if self.language else self.speaker


@attrs.frozen
class ClipAudio:
    """One decoded clip: ``audio [samples]`` float32 mono at ``sample_rate`` Hz."""

    info: ClipInfo
    audio: np.ndarray
    sample_rate: int


def read_source(sources: Sequence[Path], *, layout: str = "auto", input_format: str = "auto",
                default_speaker: str = "", default_language: str = "") -> tuple[list[Item], list[Rejection]]:
    """Items and rejected lines of ``sources``, in input order, duplicates rejected as prepare does.

    Raises:
        DataError: a source that cannot be read at all (as prepare raises it).
    """
    from flowkit.data.importers import read_inputs

    items: list[Item] = []
    rejected: list[Rejection] = []
    seen: set[str] = set()
    for entry in read_inputs([Path(p) for p in sources], layout, default_speaker, default_language, None, input_format):
        if isinstance(entry, Rejection):
            rejected.append(entry)
        elif entry.segment_id in seen:
            rejected.append(Rejection(entry.segment_id, "duplicate_id", "segment id already used", entry.source))
        else:
            seen.add(entry.segment_id)
            items.append(entry)
    return items, rejected


def info_of(item: Item) -> ClipInfo:
    """The `ClipInfo` of an importer's item."""
    return ClipInfo(item.segment_id, item.text, item.speaker, item.language, str(item.audio))


def load_clip(item: Item) -> ClipAudio:
    """Decode ``item`` to mono float32 at `CURATION_RATE`.

    Raises:
        flowkit.data.audio.AudioError: the audio cannot be decoded.
    """
    from flowkit.data.importers.sources import load_item_audio

    audio: Any = load_item_audio(item.audio, CURATION_RATE)
    return ClipAudio(info_of(item), np.asarray(audio, dtype=np.float32), CURATION_RATE)
