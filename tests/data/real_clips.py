"""Small real inputs for the importer and shard tests, built from the bundled recordings.

`real_clips` picks clips of the bundled demo recordings (flowkit/demo/clips; the shared
corpus when a checkout predates them); the writers lay the same clips out as each input
kind `flowkit prepare` reads, so a test compares an import against the plain manifest.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import numpy as np
import soundfile as sf

SHARED_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "asterisk-5voice"


@attrs.frozen
class Clip:
    segment_id: str
    path: Path  # the bundled FLAC file
    text: str
    speaker: str
    language: str


def clips_root() -> Path:
    try:
        from flowkit.data.demo import demo_clips_path

        return demo_clips_path()
    except (ImportError, Exception):  # a checkout without bundled clips: the shared corpus
        return SHARED_CORPUS


def real_clips(n: int, *, min_seconds: float = 0.6, max_seconds: float = 4.0) -> list[Clip]:
    """``n`` clips of speech, taken round-robin over the speakers (sorted ids, so always the same)."""
    root = clips_root()
    by_speaker: dict[str, list[Clip]] = {}
    for line in (root / "metadata.csv").read_text(encoding="utf-8").splitlines():
        sid, text, speaker, language = line.split("|")[:4]
        if "silence" in sid:
            continue
        path = next((root / "wavs" / f"{sid}{s}" for s in (".flac", ".wav") if (root / "wavs" / f"{sid}{s}").is_file()),
                    None)
        if path is None:
            continue
        seconds = sf.info(str(path)).duration
        if min_seconds <= seconds <= max_seconds:
            by_speaker.setdefault(speaker, []).append(Clip(sid, path, text, speaker, language))
    pools = [sorted(v, key=lambda c: c.segment_id) for _, v in sorted(by_speaker.items())]
    out: list[Clip] = []
    k = 0
    while len(out) < n and any(k < len(p) for p in pools):
        out += [p[k] for p in pools if k < len(p)]
        k += 1
    return out[:n]


def write_manifest(clips: list[Clip], path: Path) -> Path:
    """A flowkit JSONL manifest of ``clips`` (the reference an import is compared with)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": c.segment_id, "audio": str(c.path), "text": c.text, "speaker": c.speaker, "language": c.language}
            for c in clips]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def read_wave(path: Path) -> tuple[np.ndarray, int]:
    audio, sr = sf.read(str(path), dtype="float32")
    return audio, sr
