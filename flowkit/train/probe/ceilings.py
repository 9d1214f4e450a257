"""What a model can reach on the probe sentences: their recordings, and their true latents vocoded.

Shape legend: n frames, d latent channels.

The raw ceiling needs each sentence's recording, ``<segment_id>.{wav,flac,ogg}``, looked for
in ``Probe.audio_dirs`` and then among the bundled demo clips; a sentence found nowhere is
left out of it (``probe_truth_raw_items`` counts the ones scored). The vocoded ceiling puts
the ground-truth latents through the run's vocoder: the best the acoustic model can do.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["AUDIO_SUFFIXES", "Recordings", "ceiling_values"]

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")


def _bundled_audio() -> list[str]:
    """The bundled demo recordings' folder (the demo store's raw audio), when installed."""
    from flowkit.data.demo import demo_clips_path
    from flowkit.errors import DataError

    try:
        return [str(demo_clips_path() / "wavs")]
    except DataError:
        return []


def _find_audio(dirs: Sequence[str], segment_id: str) -> Path | None:
    for folder in dirs:
        for suffix in AUDIO_SUFFIXES:
            path = Path(folder) / f"{segment_id}{suffix}"
            if path.is_file():
                return path
    return None


class Recordings:
    """The recorded audio of segments, found in ``audio_dirs`` and then the demo clips, each read once."""

    def __init__(self, audio_dirs: Sequence[str]) -> None:
        self._dirs = [*audio_dirs, *_bundled_audio()]
        self._found: dict[str, tuple[np.ndarray, int] | None] = {}

    def get(self, segment_id: str) -> tuple[np.ndarray, int] | None:
        """``(audio [samples] float32, sample rate Hz)`` of ``segment_id``, or None when not found."""
        if segment_id not in self._found:
            import soundfile as sf

            path = _find_audio(self._dirs, segment_id)
            found = None
            if path is not None:
                audio, sr = sf.read(str(path), dtype="float32", always_2d=False)
                found = (audio, int(sr))
            self._found[segment_id] = found
        return self._found[segment_id]


def ceiling_values(judges: Any, recordings: Recordings, sentences: Sequence[Any], truth: Sequence[np.ndarray],
                   vocoder: Any, encoder: dict[str, Any]) -> dict[str, Any]:
    """WER/CER, SIM and DNSMOS of the ground truth (``probe_truth_vocoded_*``: ``truth``, the
    sentences' true latents ``[n d]``, through ``vocoder``; ``probe_truth_raw_*``: their
    recordings) as scored by ``judges`` (a `flowkit.train.probe.judging.ProbeJudges`)."""
    vocoded = [vocoder(x, encoder) for x in truth]
    out, _ = judges.score(vocoded, "probe_truth_vocoded")
    out.update(judges.judge(vocoded, "probe_truth_vocoded", range(len(vocoded)))[0])
    raw, found = [], []
    for i, s in enumerate(sentences):
        recording = recordings.get(s.segment_id)
        if recording is not None:
            raw.append(recording)
            found.append(i)
    if found:
        values, _ = judges.score(raw, "probe_truth_raw", found)
        out.update(values)
        out.update(judges.judge(raw, "probe_truth_raw", found, with_ref=False)[0])
    out["probe_truth_raw_items"] = len(found)
    return out
