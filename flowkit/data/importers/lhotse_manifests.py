"""Lhotse manifests as prepare inputs (the ``lhotse`` extra: ``pip install 'flowkit[lhotse]'``).

Accepted inputs: a cut manifest (``*cuts*.jsonl.gz`` / ``.jsonl``), a recordings manifest
whose supervisions manifest sits beside it (``*recordings*`` -> ``*supervisions*``), or a
folder holding either. Manifests are read lazily with `lhotse.load_manifest_lazy` and the
audio is decoded by Lhotse itself (`Cut.load_audio`: time spans, channels, every source
type Lhotse knows), then resampled by prepare's resampler.

One segment per supervision: each cut is trimmed to its supervisions
(`CutSet.trim_to_supervisions`, overlapping speech left out; a cut that one supervision
covers whole is kept as it is); the segment id is the supervision id. Mapped fields:
``text``, ``speaker``, ``language`` (names such as "English" become "en"), and
``custom["emotion"]`` / ``custom["intensity"]`` / ``custom["split"]`` when present.
Relative recording paths are looked up from the working directory (Lhotse's rule) and
then from the manifest's folder.

Rejections: ``no_supervision`` (a cut without one), ``unsupported_cut`` (mixed or
padded cuts, or a cut Lhotse cannot trim to its supervisions), ``beyond_recording`` (a
supervision that starts before its recording or cut, or ends more than
`TOLERANCE_SECONDS` after it), ``unknown_recording`` (a supervision whose recording id
the recordings manifest does not list), ``missing_audio`` (a recording file that is not
there), and prepare's usual reasons for the text and labels.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from flowkit.data.importers.sources import LhotseCutAudio
from flowkit.data.manifest import Item, Rejection, item_from_fields
from flowkit.errors import DataError

MANIFEST_SUFFIXES = (".jsonl.gz", ".jsonl")
#: how far (s) a supervision may pass its recording's ends: the tolerance Lhotse's own
#: CutSet.from_manifests matches supervisions to recordings with
TOLERANCE_SECONDS = 1e-3


def _lhotse() -> Any:
    try:
        import lhotse
    except ImportError:
        raise DataError("reading Lhotse manifests needs lhotse: pip install 'flowkit[lhotse]'") from None
    return lhotse


def is_manifest_name(path: Path) -> bool:
    """Whether ``path`` is named like a Lhotse cut, recording or supervision manifest."""
    name = path.name.lower()
    return name.endswith(MANIFEST_SUFFIXES) and any(k in name for k in ("cuts", "recordings", "supervisions"))


def looks_like_lhotse(path: Path) -> bool:
    """A Lhotse manifest file, or a folder holding cut or recordings manifests."""
    if path.is_file():
        return is_manifest_name(path)
    if path.is_dir():
        return any(is_manifest_name(p) and "supervisions" not in p.name for p in path.iterdir())
    return False


def _sibling_supervisions(recordings: Path) -> Path:
    candidate = recordings.with_name(recordings.name.replace("recordings", "supervisions"))
    if candidate == recordings or not candidate.is_file():
        raise DataError(f"{recordings}: a recordings manifest needs its supervisions beside it ({candidate.name}); "
                        "or give a cuts manifest")
    return candidate


def _manifests(path: Path) -> list[Path]:
    """The cut or recordings manifests of one input (a file, or the ones in a folder, sorted)."""
    if path.is_file():
        if "supervisions" in path.name:
            raise DataError(f"{path}: give the recordings (or cuts) manifest; its supervisions are found beside it")
        return [path]
    found = sorted(p for p in path.iterdir() if is_manifest_name(p) and "supervisions" not in p.name)
    cuts = [p for p in found if "cuts" in p.name]
    return cuts or found


def _fix_sources(cut: dict[str, Any], base: Path) -> None:
    for source in cut.get("recording", {}).get("sources", []):
        raw = source.get("source", "")
        if source.get("type") == "file" and raw and not Path(raw).is_absolute() and not Path(raw).exists():
            source["source"] = str(base / raw)


def _cuts(lhotse: Any, manifest: Path) -> tuple[Any, list[Rejection]]:
    """The cuts of one manifest, and a `Rejection` per supervision that names no listed recording
    (`CutSet.from_manifests` leaves those out without a word)."""
    orphans: list[Rejection] = []
    try:
        if "recordings" in manifest.name:
            supervisions_file = _sibling_supervisions(manifest)
            recordings = lhotse.load_manifest_lazy(manifest)
            supervisions = lhotse.load_manifest(supervisions_file)
            known = {r.id for r in recordings}  # a lazy pass over the recordings' metadata
            for number, sup in enumerate(supervisions, start=1):
                if sup.recording_id not in known:
                    orphans.append(Rejection(
                        sup.id, "unknown_recording", f"supervision of recording {sup.recording_id!r}, which "
                        f"{manifest.name} does not list; add the recording or drop the supervision",
                        f"{supervisions_file}:{number}"))
            return lhotse.CutSet.from_manifests(recordings=recordings, supervisions=supervisions), orphans
        loaded = lhotse.load_manifest_lazy(manifest)
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{manifest}: not a readable Lhotse manifest ({type(exc).__name__}: {exc})") from None
    if not isinstance(loaded, lhotse.CutSet):
        raise DataError(f"{manifest}: a Lhotse {type(loaded).__name__}, not cuts; "
                        "give a cuts manifest or the recordings one")
    return loaded, orphans


def _within(cut: Any, source: str) -> tuple[list[Any], list[Rejection]]:
    """The cut's supervisions inside its time span, and a ``beyond_recording`` `Rejection` per other one
    (Lhotse's trim_to_supervisions asserts on those, ending the whole prepare)."""
    inside: list[Any] = []
    outside: list[Rejection] = []
    whole = cut.start <= 0 and cut.recording is not None and cut.duration >= cut.recording.duration - TOLERANCE_SECONDS
    what = f"recording {cut.recording_id!r}" if whole else f"cut {cut.id!r}"
    for sup in cut.supervisions:
        if sup.start >= -TOLERANCE_SECONDS and sup.end <= cut.duration + TOLERANCE_SECONDS:
            inside.append(sup)
            continue
        outside.append(Rejection(
            sup.id, "beyond_recording", f"supervision {sup.start:.3f}-{sup.end:.3f} s lies outside the "
            f"{cut.duration:.3f} s of its {what}; fix its start and duration", source))
    return inside, outside


def read_lhotse(
    path: Path, default_speaker: str, default_language: str, languages: Sequence[str] | None
) -> Iterator[Item | Rejection]:
    """Items of a Lhotse input (one per supervision), or a Rejection per unusable cut or supervision.

    Raises:
        DataError: lhotse is not installed, or a manifest that Lhotse cannot read.
    """
    lhotse = _lhotse()
    from lhotse.cut import MonoCut
    from lhotse.utils import fastcopy

    for manifest in _manifests(Path(path)):
        base = manifest.parent
        cuts, orphans = _cuts(lhotse, manifest)
        yield from orphans
        for number, cut in enumerate(cuts, start=1):
            source = f"{manifest}:{number}"
            if not isinstance(cut, MonoCut):
                yield Rejection(cut.id, "unsupported_cut",
                                f"a {type(cut).__name__}; only single-recording cuts are read", source)
                continue
            if not cut.supervisions:
                yield Rejection(cut.id, "no_supervision", "the cut has no supervision (no text)", source)
                continue
            sups, outside = _within(cut, source)
            yield from outside
            if not sups:
                continue
            if outside:
                cut = fastcopy(cut, supervisions=sups)
            whole = len(sups) == 1 and sups[0].start <= 0 and sups[0].end >= cut.duration - 1e-6
            try:
                pieces = [cut] if whole else list(
                    lhotse.CutSet.from_cuts([cut]).trim_to_supervisions(keep_overlapping=False))
            except Exception as exc:  # Lhotse asserts on layouts it cannot trim (channels, overlaps)
                for sup in sups:
                    yield Rejection(sup.id, "unsupported_cut", f"Lhotse cannot cut {cut.id!r} to its supervisions "
                                    f"({type(exc).__name__}: {exc})", source)
                continue
            for piece in pieces:
                sup = piece.supervisions[0]
                custom = sup.custom or {}
                data = piece.to_dict()
                _fix_sources(data, base)
                audio = LhotseCutAudio(data)
                segment_id = sup.id
                if not audio.exists():
                    yield Rejection(segment_id, "missing_audio", "a recording source file is missing", source)
                    continue
                fields = {
                    "id": segment_id, "text": sup.text or "", "speaker": sup.speaker or "",
                    "language": sup.language or "",  # mapped by item_from_fields ("English" -> "en")
                    "emotion": str(custom.get("emotion", "") or ""),
                    "intensity": str(custom.get("intensity", "") or ""),
                    "split": str(custom.get("split", "") or ""),
                }
                yield item_from_fields(fields, audio, source, default_speaker or manifest.parent.name,
                                       default_language, languages)
