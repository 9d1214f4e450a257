"""Test lists for ``flowkit eval``: reading them, and rejecting bad lines one by one.

Two formats:

- **meta.lst** (Seed-TTS-eval, F5-TTS): pipe-separated, no header, one utterance a line,
  ``utt|prompt_text|prompt_wav|target_text`` with an optional fifth field ``target_wav``
  (a recording of the target text: the ceilings and the duration ratio need it). Paths
  are relative to the list's folder. Every line has the language ``--language``.
- **a flowkit manifest** (``.jsonl`` or headed ``.csv``, docs/data-format.md "Inputs"):
  ``audio`` (the target recording) and ``text`` required; ``id``, ``speaker``,
  ``language``, ``emotion``, ``intensity`` as for ``flowkit prepare``; a line may give its
  own ``prompt_audio`` and ``prompt_text``, else its prompt is the next line of the same
  speaker (file order, wrapping round), the whole clip with its text, as the training probe
  pairs its sentences. A speaker with one line has no prompt: that line is rejected.

A bad line is one `TestRejection` with its line number and the rest goes on: a wrong field
count, an empty utt, text or prompt text, a duplicate utt, a prompt or target recording
that is missing, does not decode or holds NaN or infinite samples, a language the model
lacks. Prompt and target
recordings are decoded here, once, so that a bad file is a rejection, not a failed
synthesis batch.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import DataError

__all__ = ["TestItem", "TestRejection", "TestSet", "read_testset", "testset_name"]

MANIFEST_SUFFIXES = (".jsonl", ".csv")
#: the longest utt: it names the file ``<utt>.wav`` (255 bytes is the usual file name limit)
MAX_UTT_BYTES = 200


@attrs.frozen
class TestItem:
    """One utterance to synthesise and judge.

    Attributes:
        utt: its id (unique in the list); text: what to say; language: ISO 639-1 ("" unknown).
        prompt_wav, prompt_text: the voice's reference recording and what it says.
        target_wav: a recording of ``text`` (ceilings, duration ratio), or None.
        line: 1-based line of the list; speaker, emotion, intensity: manifest labels
            ("" / nan when unknown).
    """

    __test__ = False  # not a pytest class

    utt: str
    text: str
    prompt_wav: Path
    prompt_text: str
    target_wav: Path | None
    language: str
    line: int
    speaker: str = ""
    emotion: str = ""
    intensity: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["prompt_wav"] = str(self.prompt_wav)
        out["target_wav"] = None if self.target_wav is None else str(self.target_wav)
        return out


@attrs.frozen
class TestRejection:
    """A line that is not evaluated: its number, utt (when readable), reason and detail."""

    __test__ = False

    line: int
    utt: str
    reason: str
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def describe(self, source: str) -> str:
        """``list:7 (utt3): missing_prompt: ...``: one line for the printed summary."""
        who = f" ({self.utt})" if self.utt else ""
        return f"{source}:{self.line}{who}: {self.reason}: {self.detail}"


@attrs.frozen
class TestSet:
    """A read test list: the items to evaluate (list order) and the rejected lines."""

    __test__ = False

    path: Path
    format: str  # "meta.lst" or "manifest"
    items: tuple[TestItem, ...]
    rejections: tuple[TestRejection, ...]


def testset_name(path: str | Path) -> str:
    """A folder name for a test list: its stem, or its folder's name for ``meta.lst``
    (Seed-TTS-eval keeps one ``meta.lst`` per folder: ``seedtts_testset/en/meta.lst`` -> ``en``)."""
    p = Path(path)
    if p.stem == "meta" and p.parent.name:
        return p.parent.name
    return p.stem or "testset"


def _audio_problem(path: Path) -> str | None:
    """Why ``path`` cannot serve as a recording (missing, undecodable, empty, NaN or
    infinite samples in a float file), or None."""
    import soundfile as sf

    if not path.is_file():
        return f"no such file {path}"
    try:
        info = sf.info(str(path))
    except Exception as exc:  # soundfile raises LibsndfileError / RuntimeError by version
        return f"{path} does not decode ({str(exc).strip() or type(exc).__name__})"
    if info.frames <= 0:
        return f"{path} holds no samples"
    if info.subtype in ("FLOAT", "DOUBLE"):  # only float files can hold NaN or infinity
        import numpy as np

        try:
            audio, _ = sf.read(str(path), dtype="float32", always_2d=True)
        except Exception as exc:  # noqa: BLE001 - a body that does not decode is a rejection, as above
            return f"{path} does not decode ({str(exc).strip() or type(exc).__name__})"
        bad = int(audio.size - np.isfinite(audio).sum())
        if bad:
            return f"{path}: {bad} of {audio.size} samples are NaN or infinite; give a clean recording"
    return None


def _resolve(base: Path, raw: str) -> Path:
    p = Path(raw.strip())
    return p if p.is_absolute() else base / p


def _read_text_lines(path: Path) -> list[tuple[int, str | None]]:
    """``(line number, text)`` of every non-blank line; text None where it is not UTF-8."""
    from flowkit.data.manifest import read_lines

    return [(number, text) for number, text, raw in read_lines(path) if text is None or text.strip()]


def _meta_lst(path: Path, language: str) -> tuple[list[TestItem], list[TestRejection]]:
    items: list[TestItem] = []
    rejections: list[TestRejection] = []
    for number, line in _read_text_lines(path):
        if line is None:
            rejections.append(TestRejection(number, "", "bad_encoding", "the line is not UTF-8"))
            continue
        fields = line.rstrip("\r\n").split("|")
        utt = fields[0].strip()
        if len(fields) not in (4, 5):
            rejections.append(TestRejection(number, utt, "bad_fields", (
                f"{len(fields)} fields; a meta.lst line is utt|prompt_text|prompt_wav|target_text[|target_wav]")))
            continue
        target = _resolve(path.parent, fields[4]) if len(fields) == 5 and fields[4].strip() else None
        items.append(TestItem(utt, fields[3].strip(), _resolve(path.parent, fields[2]), fields[1].strip(), target,
                              language, number))
    return items, rejections


def _manifest(path: Path, language: str) -> tuple[list[TestItem], list[TestRejection]]:
    """Items of a jsonl/csv manifest; prompts of lines without their own are paired afterwards."""
    records: list[tuple[int, dict[str, str] | None, str]] = []
    lines = _read_text_lines(path)
    if path.suffix.lower() == ".jsonl":
        for number, line in lines:
            if line is None:
                records.append((number, None, "the line is not UTF-8"))
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:
                records.append((number, None, f"not a JSON object ({exc})"))
                continue
            records.append((number, {k: "" if v is None else str(v) for k, v in obj.items()}, ""))
    else:
        if not lines or lines[0][1] is None:
            raise DataError(f"{path}: a CSV test list needs a UTF-8 header row with 'audio' and 'text' columns "
                            "(line 1)")
        header = [h.strip() for h in next(csv.reader([lines[0][1]]))]
        if "audio" not in header or "text" not in header:
            raise DataError(f"{path}: the CSV header {','.join(header)} lacks 'audio' or 'text' (line 1)")
        for number, line in lines[1:]:
            if line is None:
                records.append((number, None, "the line is not UTF-8"))
                continue
            row = next(csv.reader([line]))
            if len(row) != len(header):
                records.append((number, None, f"{len(row)} fields; the header has {len(header)}"))
            else:
                records.append((number, dict(zip(header, row, strict=True)), ""))
    items: list[TestItem] = []
    rejections: list[TestRejection] = []
    pending: list[tuple[int, dict[str, str]]] = []
    for number, fields, problem in records:
        if fields is None:
            rejections.append(TestRejection(number, "", "bad_fields" if "fields" in problem else "bad_line", problem))
            continue
        if not fields.get("audio", "").strip():
            rejections.append(TestRejection(number, fields.get("id", ""), "missing_target", "no 'audio' field"))
            continue
        pending.append((number, fields))
    # a line's prompt: its own, else the next line of the same speaker (wrapping round)
    speakers = [(f.get("speaker") or "").strip() for _, f in pending]
    for k, (number, fields) in enumerate(pending):
        audio = _resolve(path.parent, fields["audio"])
        utt = (fields.get("id") or "").strip() or audio.stem
        intensity = math.nan
        if (fields.get("intensity") or "").strip():
            try:
                intensity = float(fields["intensity"])
            except ValueError:
                rejections.append(TestRejection(number, utt, "bad_intensity",
                                                f"intensity {fields['intensity']!r} is not a number in [0, 1]"))
                continue
        if (fields.get("prompt_audio") or "").strip():
            prompt = _resolve(path.parent, fields["prompt_audio"])
            prompt_text = (fields.get("prompt_text") or "").strip()
        else:
            others = [j for j in list(range(k + 1, len(pending))) + list(range(k)) if speakers[j] == speakers[k]]
            if not others:
                rejections.append(TestRejection(number, utt, "missing_prompt", (
                    f"no prompt_audio and no other line of speaker {speakers[k]!r} to take the prompt from")))
                continue
            other = pending[others[0]][1]
            prompt, prompt_text = _resolve(path.parent, other["audio"]), (other.get("text") or "").strip()
        items.append(TestItem(utt, (fields.get("text") or "").strip(), prompt, prompt_text, audio,
                              (fields.get("language") or language).strip(), number, speakers[k],
                              (fields.get("emotion") or "").strip().lower(), intensity))
    return items, rejections


def _check(item: TestItem, seen: set[str], languages: Sequence[str] | None) -> TestRejection | None:
    """The rejection of ``item``, or None when it can be evaluated."""
    from flowkit.data.labels import EMOTIONS

    def reject(reason: str, detail: str) -> TestRejection:
        return TestRejection(item.line, item.utt, reason, detail)

    if not item.utt:
        return reject("missing_utt", "the utt (first field / id) is empty")
    if item.utt in seen:
        return reject("duplicate_utt", f"utt {item.utt!r} is on an earlier line too")
    if "/" in item.utt or "\\" in item.utt or "\0" in item.utt or item.utt in (".", ".."):
        return reject("bad_utt", f"utt {item.utt!r} cannot name a file (no '/', '\\' or NUL)")
    if len(item.utt.encode("utf-8")) > MAX_UTT_BYTES:  # its WAV is <utt>.wav: a longer name is refused by file systems
        return reject("bad_utt", f"utt {item.utt[:40]!r}... is {len(item.utt.encode('utf-8'))} bytes; it names the "
                      f"file <utt>.wav, so give at most {MAX_UTT_BYTES} bytes")
    if not item.text:
        return reject("empty_text", "the target text is empty")
    if not item.prompt_text:
        return reject("empty_prompt_text", "the prompt text is empty (the model needs what its prompt says)")
    if languages is not None and item.language and item.language not in languages:
        known = ", ".join(languages) or "none recorded"
        return reject("unknown_language", f"language {item.language!r}: the model was trained on {known}")
    if item.emotion and item.emotion not in EMOTIONS:
        return reject("unknown_emotion", f"emotion {item.emotion!r} (known: {', '.join(EMOTIONS)})")
    if not math.isnan(item.intensity) and not 0.0 <= item.intensity <= 1.0:
        return reject("bad_intensity", f"intensity {item.intensity!r} is not a number in [0, 1]")
    problem = _audio_problem(item.prompt_wav)
    if problem is not None:
        return reject("bad_prompt_wav", problem)
    if item.target_wav is not None:
        problem = _audio_problem(item.target_wav)
        if problem is not None:
            return reject("bad_target_wav", problem)
    return None


def read_testset(path: str | Path, *, language: str = "en", languages: Sequence[str] | None = None) -> TestSet:
    """Read the test list ``path`` (format from the suffix: ``.jsonl``/``.csv`` a manifest,
    anything else meta.lst), check every line, and split items from rejections.

    Args:
        language: the language of meta.lst lines and of manifest lines without one.
        languages: the model's languages; a line in another is rejected (None: any).

    Raises:
        DataError: the list does not exist or cannot be read, or a CSV without its header.
    """
    from flowkit import hub

    if hub.is_hub(path):  # a list names recordings beside it: the folder must be here, not one file of it
        ref = hub.parse(path)
        raise DataError(f"--testset {hub.SCHEME}{ref.repo_id}/{ref.path}: a test list is read from a local folder (its "
                        f"recordings are paths beside it); fetch the folder (`hf download {ref.repo_id} "
                        "--repo-type dataset`) and give its meta.lst")
    p = Path(path)
    if not p.is_file():
        raise DataError(f"--testset {p}: no such file; give a meta.lst (utt|prompt_text|prompt_wav|target_text"
                        "[|target_wav]) or a .jsonl/.csv manifest")
    manifest = p.suffix.lower() in MANIFEST_SUFFIXES
    raw_items, rejections = (_manifest if manifest else _meta_lst)(p, language)
    items: list[TestItem] = []
    seen: set[str] = set()
    for item in raw_items:
        rejection = _check(item, seen, languages)
        if rejection is None:
            items.append(item)
            seen.add(item.utt)
        else:
            rejections.append(rejection)
    rejections.sort(key=lambda r: r.line)
    return TestSet(p, "manifest" if manifest else "meta.lst", tuple(items), tuple(rejections))
