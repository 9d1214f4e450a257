"""Reading prepare inputs: LJSpeech-style directories and JSONL/CSV manifests.

A directory input holds ``metadata.csv`` (pipe-separated, no header) and the audio in
``wavs/<id>.{wav,flac,ogg}``. Its columns are named by a layout, e.g.
``id,text,normalized_text`` (LJSpeech) or ``id,text,speaker,language`` (asterisk-5voice);
``auto`` picks one from the column count of the first line (2: ``id,text``; 3: LJSpeech;
4: ``id,text,speaker,language``). When a ``normalized_text`` column is present and
non-empty it is the segment's text (numbers spelled out, as the model should read them).

A manifest input is a ``.jsonl`` file (one JSON object per line) or a ``.csv`` file with a
header row; fields ``audio`` (path, relative to the manifest's folder) and ``text`` are
required, ``id`` (default: the audio file's stem), ``speaker``, ``language``, ``emotion``,
``intensity`` (0..1) and ``split`` (``train``/``val``) are optional.

Every input kind's language goes through `flowkit.data.labels.language_code` here
(`item_from_fields`): ``EN``, ``en-US`` and ``English`` are all ``en``.

Bad lines are not errors: each becomes a `Rejection` with a reason and the rest goes on.
Text files are decoded line by line, so one line that is not UTF-8 is one ``bad_encoding``
rejection (with its line number), not a failed prepare. Audio files are found whatever
the case of their extension (``clip.WAV``, ``clip.Flac``).
"""

from __future__ import annotations

import codecs
import csv
import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.data.audio import AUDIO_SUFFIXES
from flowkit.data.labels import EMOTIONS, LANGUAGE_FORMS, language_code, language_ok
from flowkit.errors import DataError

LAYOUT_COLUMNS = ("id", "text", "normalized_text", "speaker", "language", "emotion", "intensity", "split", "_")
AUTO_LAYOUTS = {2: "id,text", 3: "id,text,normalized_text", 4: "id,text,speaker,language"}
SPLITS = ("train", "val")


@attrs.frozen
class Item:
    """One clip to prepare, as the input describes it (nothing decoded yet)."""

    segment_id: str
    audio: Any  # a Path, or an `flowkit.data.importers.sources.AudioSource` (audio inside a dataset)
    text: str
    speaker: str
    language: str
    emotion: str = ""
    intensity: float = math.nan
    split: str | None = None  # None: prepare assigns one
    source: str = ""  # "file:line", for rejection reports


@attrs.frozen
class Rejection:
    """An input item that was skipped, and why (one line of the rejections file)."""

    segment_id: str
    reason: str
    detail: str
    source: str = ""

    def to_dict(self) -> dict[str, str]:
        return attrs.asdict(self)


def parse_layout(layout: str, first_line_columns: int, path: Path) -> list[str]:
    """Column names of a metadata.csv for ``layout`` ("auto" or comma-separated names).

    Raises:
        DataError: an unknown column name, no ``id``/``text`` column, or ``auto`` with a
            column count it cannot guess.
    """
    if layout == "auto":
        if first_line_columns not in AUTO_LAYOUTS:
            raise DataError(
                f"{path}: cannot guess the layout of {first_line_columns} columns; pass --layout, "
                f"e.g. --layout id,text,speaker,language,emotion (columns: {', '.join(LAYOUT_COLUMNS)})"
            )
        layout = AUTO_LAYOUTS[first_line_columns]
    columns = [c.strip() for c in layout.split(",")]
    for c in columns:
        if c not in LAYOUT_COLUMNS:
            raise DataError(f"--layout {layout!r}: unknown column {c!r}; known: {', '.join(LAYOUT_COLUMNS)}")
    if "id" not in columns or "text" not in columns:
        raise DataError(f"--layout {layout!r} needs an 'id' and a 'text' column")
    return columns


def read_lines(path: Path) -> list[tuple[int, str | None, bytes]]:
    """The non-blank lines of a text file, each decoded on its own as UTF-8 (a byte-order
    mark at the start is dropped): ``(number, text, raw)``, with ``text`` None for a line
    that is not valid UTF-8.

    Raises:
        DataError: the file cannot be read.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror})") from None
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    out: list[tuple[int, str | None, bytes]] = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        line = line[:-1] if line.endswith(b"\r") else line
        try:
            text: str | None = line.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is None or text.strip():
            out.append((number, text, line))
    return out


def encoding_rejection(raw: bytes, source: str, segment_id: str = "") -> Rejection:
    """The `Rejection` of a line that is not UTF-8, naming the first bad byte."""
    try:
        raw.decode("utf-8")
        where = ""
    except UnicodeDecodeError as exc:
        where = f": byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line"
    return Rejection(segment_id, "bad_encoding", f"the line is not UTF-8{where}; save the file as UTF-8", source)


class AudioFinder:
    """Finds audio files by name with the extension in any case (``clip.WAV``, ``clip.Flac``);
    lists each folder once."""

    def __init__(self) -> None:
        self._folders: dict[Path, dict[str, Path]] = {}

    def _index(self, folder: Path) -> dict[str, Path]:
        index = self._folders.get(folder)
        if index is None:
            index = {}
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        stem, dot, suffix = entry.name.rpartition(".")
                        if dot:
                            index.setdefault(f"{stem}.{suffix.lower()}", Path(entry.path))
            except OSError:
                pass
            self._folders[folder] = index
        return index

    def by_id(self, folder: Path, segment_id: str) -> Path | None:
        """``folder/<segment_id>.<wav|flac|ogg>`` in any case of the extension, or None."""
        index = self._index(folder)
        for suffix in AUDIO_SUFFIXES:
            found = index.get(f"{segment_id}{suffix}")
            if found is not None and found.is_file():
                return found
        return None

    def by_path(self, path: Path) -> Path | None:
        """``path`` itself, or the file that differs from it only in the case of its extension."""
        if path.is_file():
            return path
        found = self._index(path.parent).get(f"{path.stem}{path.suffix.lower()}") if path.suffix else None
        return found if found is not None and found.is_file() else None


def item_from_fields(
    fields: dict[str, str], audio: Any, source: str, default_speaker: str, default_language: str,
    languages: Sequence[str] | None,
) -> Item | Rejection:
    """One `Item` from an input's fields (``id``, ``text``/``normalized_text``, ``speaker``,
    ``language``, ``emotion``, ``intensity``, ``split``), or the `Rejection` saying what is wrong.

    ``audio`` is a file path or an audio source; None means the audio is missing.
    """
    segment_id = fields.get("id", "").strip()
    if not segment_id:
        return Rejection("", "missing_id", "the line has no id", source)
    text = (fields.get("normalized_text") or "").strip() or (fields.get("text") or "").strip()
    if not text:
        return Rejection(segment_id, "missing_text", "the text is empty", source)
    if audio is None:
        return Rejection(segment_id, "missing_audio", f"no audio file {segment_id}{{{','.join(AUDIO_SUFFIXES)}}}",
                         source)
    given = (fields.get("language") or "").strip() or (default_language or "").strip()
    language = language_code(given)  # the one normalisation of every input kind
    if not language_ok(language, languages):
        if languages is None:
            detail = (f"language {given!r} is not one flowkit can map; give {LANGUAGE_FORMS} "
                      "(docs/data-format.md), or admit it with -b \"prepare.languages = [...]\"")
        else:
            detail = f"language {given!r} is not in prepare.languages ({', '.join(languages)})"
        return Rejection(segment_id, "unknown_language", detail, source)
    emotion = (fields.get("emotion") or "").strip().lower()
    if emotion and emotion not in EMOTIONS:
        return Rejection(segment_id, "unknown_emotion", f"emotion {emotion!r} (known: {', '.join(EMOTIONS)})", source)
    raw_intensity = str(fields.get("intensity") or "").strip()
    intensity = math.nan
    if raw_intensity:
        try:
            intensity = float(raw_intensity)
        except ValueError:
            intensity = -1.0
        if not 0.0 <= intensity <= 1.0:
            return Rejection(segment_id, "bad_intensity", f"intensity {raw_intensity!r} is not a number in [0, 1]",
                             source)
    split = (fields.get("split") or "").strip() or None
    if split is not None and split not in SPLITS:
        return Rejection(segment_id, "bad_split", f"split {split!r} (known: {', '.join(SPLITS)})", source)
    speaker = (fields.get("speaker") or "").strip() or default_speaker
    return Item(segment_id, audio, text, speaker, language, emotion, intensity, split, source)


def read_metadata_dir(
    root: Path, layout: str, default_speaker: str, default_language: str, languages: Sequence[str] | None
) -> Iterator[Item | Rejection]:
    """Items of an LJSpeech-style directory, or a Rejection per bad line.

    Raises:
        DataError: no metadata.csv, or a layout that cannot be used.
    """
    meta = root / "metadata.csv"
    if not meta.is_file():
        raise DataError(f"{root}: no metadata.csv (expected an LJSpeech-style folder with metadata.csv and wavs/)")
    lines = read_lines(meta)
    first = next((text for _, text, _ in lines if text is not None), "")
    columns = parse_layout(layout, len(first.split("|")), meta)
    speaker = default_speaker or root.name
    finder = AudioFinder()
    for number, line, raw in lines:
        source = f"{meta}:{number}"
        if line is None:
            yield encoding_rejection(raw, source, raw.split(b"|")[0].decode("utf-8", "replace").strip())
            continue
        parts = line.split("|")
        if len(parts) != len(columns):
            seg = parts[0].strip() if parts else ""
            yield Rejection(seg, "bad_columns", f"{len(parts)} columns, layout {','.join(columns)} has {len(columns)}",
                            source)
            continue
        fields = dict(zip(columns, parts, strict=True))
        audio = finder.by_id(root / "wavs", fields["id"].strip()) if fields["id"].strip() else None
        yield item_from_fields(fields, audio, source, speaker, default_language, languages)


def read_manifest(
    path: Path, default_speaker: str, default_language: str, languages: Sequence[str] | None
) -> Iterator[Item | Rejection]:
    """Items of a ``.jsonl`` or headed ``.csv`` manifest, or a Rejection per bad line.

    Raises:
        DataError: an unreadable manifest, or a CSV without an ``audio`` column.
    """
    speaker = default_speaker or path.parent.name
    lines = read_lines(path)
    records: list[tuple[int, dict[str, str] | None, str]] = []
    encoding: dict[int, bytes] = {}  # line number -> the undecodable bytes
    if path.suffix.lower() == ".jsonl":
        for number, line, raw in lines:
            if line is None:
                encoding[number] = raw
                records.append((number, None, ""))
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
                records.append((number, {k: "" if v is None else str(v) for k, v in obj.items()}, ""))
            except ValueError as exc:
                records.append((number, None, str(exc)))
    else:
        header = next(csv.reader([lines[0][1]])) if lines and lines[0][1] is not None else None
        if header is None or "audio" not in [h.strip() for h in header]:
            raise DataError(f"{path}: a CSV manifest needs a UTF-8 header row with an 'audio' column (line 1)")
        header = [h.strip() for h in header]
        for number, line, raw in lines[1:]:
            if line is None:
                encoding[number] = raw
                records.append((number, None, ""))
                continue
            row = next(csv.reader([line]))  # one record per line: a bad line costs only itself
            if len(row) != len(header):
                records.append((number, None, "wrong column count"))
            else:
                records.append((number, dict(zip(header, row, strict=True)), ""))
    finder = AudioFinder()
    for number, fields, problem in records:
        source = f"{path}:{number}"
        if number in encoding:
            yield encoding_rejection(encoding[number], source)
            continue
        if fields is None:
            yield Rejection("", "bad_line", problem, source)
            continue
        raw_audio = fields.get("audio", "").strip()
        if not raw_audio:
            yield Rejection(fields.get("id", ""), "missing_audio", "no 'audio' field", source)
            continue
        audio = Path(raw_audio)
        if not audio.is_absolute():
            audio = path.parent / audio
        fields.setdefault("id", "")
        if not fields["id"].strip():
            fields["id"] = audio.stem
        yield item_from_fields(fields, finder.by_path(audio), source, speaker, default_language, languages)


def read_inputs(
    inputs: Sequence[Path], layout: str, default_speaker: str, default_language: str, languages: Sequence[str] | None
) -> Iterator[Item | Rejection]:
    """Items of every input in order (directories and manifests may be mixed).

    Raises:
        DataError: an input that is neither a folder with metadata.csv nor a .jsonl/.csv manifest.
    """
    for path in inputs:
        path = Path(path)
        if path.is_dir():
            yield from read_metadata_dir(path, layout, default_speaker, default_language, languages)
        elif path.is_file() and path.suffix.lower() in (".jsonl", ".csv"):
            yield from read_manifest(path, default_speaker, default_language, languages)
        else:
            raise DataError(
                f"{path}: not an input flowkit can read; give a folder with metadata.csv + wavs/, "
                "or a .jsonl/.csv manifest"
            )
