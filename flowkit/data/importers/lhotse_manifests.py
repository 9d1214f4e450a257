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
padded cuts), ``missing_audio`` (a recording file that is not there), and prepare's usual
reasons for the text and labels.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from flowkit.data.importers.languages import language_code
from flowkit.data.importers.sources import LhotseCutAudio
from flowkit.data.manifest import Item, Rejection, item_from_fields
from flowkit.errors import DataError

MANIFEST_SUFFIXES = (".jsonl.gz", ".jsonl")


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


def _cuts(lhotse: Any, manifest: Path) -> Any:
    try:
        if "recordings" in manifest.name:
            recordings = lhotse.load_manifest_lazy(manifest)
            supervisions = lhotse.load_manifest(_sibling_supervisions(manifest))
            return lhotse.CutSet.from_manifests(recordings=recordings, supervisions=supervisions)
        loaded = lhotse.load_manifest_lazy(manifest)
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"{manifest}: not a readable Lhotse manifest ({type(exc).__name__}: {exc})") from None
    if not isinstance(loaded, lhotse.CutSet):
        raise DataError(f"{manifest}: a Lhotse {type(loaded).__name__}, not cuts; give a cuts manifest or the recordings one")
    return loaded


def read_lhotse(
    path: Path, default_speaker: str, default_language: str, languages: Sequence[str] | None
) -> Iterator[Item | Rejection]:
    """Items of a Lhotse input (one per supervision), or a Rejection per unusable cut.

    Raises:
        DataError: lhotse is not installed, or a manifest that Lhotse cannot read.
    """
    lhotse = _lhotse()
    from lhotse.cut import MonoCut

    for manifest in _manifests(Path(path)):
        base = manifest.parent
        for number, cut in enumerate(_cuts(lhotse, manifest), start=1):
            source = f"{manifest}:{number}"
            if not isinstance(cut, MonoCut):
                yield Rejection(cut.id, "unsupported_cut", f"a {type(cut).__name__}; only single-recording cuts are read", source)
                continue
            if not cut.supervisions:
                yield Rejection(cut.id, "no_supervision", "the cut has no supervision (no text)", source)
                continue
            whole = len(cut.supervisions) == 1 and cut.supervisions[0].start <= 0 and \
                cut.supervisions[0].end >= cut.duration - 1e-6
            pieces = [cut] if whole else lhotse.CutSet.from_cuts([cut]).trim_to_supervisions(keep_overlapping=False)
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
                    "language": language_code(sup.language) or default_language,
                    "emotion": str(custom.get("emotion", "") or ""), "intensity": str(custom.get("intensity", "") or ""),
                    "split": str(custom.get("split", "") or ""),
                }
                yield item_from_fields(fields, audio, source, default_speaker or manifest.parent.name,
                                       default_language, languages)
