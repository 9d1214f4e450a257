"""The LibriTTS / LibriTTS-R folder layout as a prepare input.

Both corpora (openslr.org resources 60 and 141) lay out each utterance as
``<subset>/<speaker>/<chapter>/<speaker>_<chapter>_<paragraph>_<sentence>.wav`` with its
text beside it in ``.normalized.txt`` (numbers and abbreviations spelled out: what the
model should read) and ``.original.txt``. Any folder above the speaker folders works
(the corpus root, one subset such as ``train-clean-100``, or a single speaker).

Mapped fields: the id is the file stem, the speaker and chapter come from the path
(``speaker`` is the speaker folder's number; the chapter is part of the id), the text is
the normalized transcript (the original one when the normalized file is missing), the
language is ``prepare.default_language`` or ``en``.

Rejections: ``missing_audio`` (a transcript without its ``.wav``), ``missing_text`` (an
empty transcript), ``bad_path`` (a file whose name does not start with its speaker and
chapter folders: a layout that is not LibriTTS's), and prepare's usual reasons.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from flowkit.data.manifest import Item, Rejection, item_from_fields

NORMALIZED = ".normalized.txt"
ORIGINAL = ".original.txt"


def looks_like_libritts(path: Path) -> bool:
    """A folder with ``.normalized.txt`` transcripts within three levels (speaker/chapter/file)."""
    if not path.is_dir():
        return False
    return any(next(path.glob("*/" * depth + f"*{NORMALIZED}"), None) is not None for depth in range(4))


def read_libritts(
    root: Path, default_speaker: str, default_language: str, languages: Sequence[str] | None
) -> Iterator[Item | Rejection]:
    """Items of a LibriTTS-style folder in sorted path order, or a Rejection per unusable utterance."""
    root = Path(root)
    stems = sorted({str(p)[: -len(NORMALIZED)] for p in root.rglob(f"*{NORMALIZED}")} |
                   {str(p)[: -len(ORIGINAL)] for p in root.rglob(f"*{ORIGINAL}")})
    for stem in stems:
        base = Path(stem)
        source = f"{base}{NORMALIZED}"
        parts = base.name.split("_")
        speaker, chapter = base.parent.parent.name, base.parent.name
        if len(parts) < 3 or parts[0] != speaker or parts[1] != chapter:
            if default_speaker:  # a flat folder of utterances: the speaker is given
                speaker = default_speaker
            else:
                yield Rejection(base.name, "bad_path", f"expected <speaker>/<chapter>/<speaker>_<chapter>_..., got "
                                f"{base.relative_to(root) if base.is_relative_to(root) else base}", source)
                continue
        text = ""
        for suffix in (NORMALIZED, ORIGINAL):
            candidate = Path(stem + suffix)
            if candidate.is_file():
                text = candidate.read_text(encoding="utf-8").strip()
                if text:
                    break
        wav = Path(stem + ".wav")
        if not wav.is_file():
            yield Rejection(base.name, "missing_audio", f"no {wav.name} beside the transcript", source)
            continue
        fields = {"id": base.name, "text": text, "speaker": speaker, "language": default_language or "en"}
        yield item_from_fields(fields, wav, source, speaker, default_language or "en", languages)
