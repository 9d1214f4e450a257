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
empty transcript, or a ``.wav`` with neither transcript beside it), ``bad_encoding`` (a
transcript that is not UTF-8: the utterance is rejected, not read in another text),
``unreadable_text`` (a transcript that cannot be read), ``bad_path`` (a file whose name
does not start with its speaker and chapter folders: a layout that is not LibriTTS's), and
prepare's usual reasons.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from flowkit.data.manifest import Item, Rejection, item_from_fields

NORMALIZED = ".normalized.txt"
ORIGINAL = ".original.txt"
AUDIO = ".wav"


def looks_like_libritts(path: Path) -> bool:
    """A folder with ``.normalized.txt`` transcripts within three levels (speaker/chapter/file)."""
    if not path.is_dir():
        return False
    return any(next(path.glob("*/" * depth + f"*{NORMALIZED}"), None) is not None for depth in range(4))


def _transcript(stem: str, segment_id: str) -> tuple[str, Rejection | None]:
    """The utterance's text: the normalized transcript, else the original one ("" when neither
    has text), or the `Rejection` of a transcript that cannot be read as UTF-8 text."""
    for suffix in (NORMALIZED, ORIGINAL):
        candidate = Path(stem + suffix)
        if not candidate.is_file():
            continue
        try:
            raw = candidate.read_bytes()
        except OSError as exc:
            return "", Rejection(segment_id, "unreadable_text", f"cannot read {candidate.name} ({exc.strerror})",
                                 str(candidate))
        try:
            text = raw.decode("utf-8-sig").strip()
        except UnicodeDecodeError as exc:
            return "", Rejection(segment_id, "bad_encoding", f"{candidate.name} is not UTF-8: "
                                 f"byte 0x{raw[exc.start]:02x} at byte {exc.start + 1}; save it as UTF-8",
                                 str(candidate))
        if text:
            return text, None
    return "", None


def read_libritts(
    root: Path, default_speaker: str, default_language: str, languages: Sequence[str] | None
) -> Iterator[Item | Rejection]:
    """Items of a LibriTTS-style folder in sorted path order, or a Rejection per unusable utterance
    (every ``.wav`` and every transcript is an item or a rejection: none is left out unsaid)."""
    root = Path(root)
    stems: set[str] = set()
    for path in root.rglob("*"):  # one walk of the tree
        name = str(path)
        suffix = next((s for s in (NORMALIZED, ORIGINAL, AUDIO) if name.endswith(s)), None)
        if suffix is not None:
            stems.add(name[: -len(suffix)])
    language = default_language or "en"  # mapped by item_from_fields, as every input's
    for stem in sorted(stems):
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
        wav = Path(stem + AUDIO)
        if not any(Path(stem + suffix).is_file() for suffix in (NORMALIZED, ORIGINAL)):
            yield Rejection(base.name, "missing_text", f"{wav.name} has no {base.name}{NORMALIZED} (nor "
                            f"{ORIGINAL}) beside it", str(wav))
            continue
        text, problem = _transcript(stem, base.name)
        if problem is not None:
            yield problem
            continue
        if not wav.is_file():
            yield Rejection(base.name, "missing_audio", f"no {wav.name} beside the transcript", source)
            continue
        fields = {"id": base.name, "text": text, "speaker": speaker, "language": ""}
        yield item_from_fields(fields, wav, source, speaker, language, languages)
