"""`curate`: judge every clip of a source and write the keep/drop list and its report.

Top to bottom: read the source as prepare does (`flowkit.curation.clips.read_source`),
measure every clip with every criterion (`flowkit.curation.measure`, resumable, in worker
processes), decide per criterion (`flowkit.curation.decide`), write the lists, the
summary and the HTML page (`flowkit.curation.page`). The source's files are only read.

Settings are the gin configurable ``Curation`` (gin/curate.gin); each criterion's
thresholds are its own (``criterion.transcript_cer.k = 4.0``, ...).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import gin

from flowkit.errors import ConfigError

__all__ = ["Curation", "CurationOutcome", "curate", "default_criteria"]

SUMMARY = "curation.json"
#: the criteria of a curation that names none, in the order reasons are listed
DEFAULT_CRITERIA = ("transcript_cer", "dnsmos", "speaking_rate", "speaker_centroid", "clipping", "silence")


def default_criteria() -> list[Any]:
    """Every criterion of `DEFAULT_CRITERIA`, built through the registry (gin bindings apply)."""
    from flowkit import registry

    registry.load_plugins()
    return [registry.build("criterion", name) for name in DEFAULT_CRITERIA]


@gin.configurable("Curation")
@attrs.frozen
class Curation:
    """How a corpus is curated (gin: ``Curation.<field>``).

    Attributes:
        criteria: the criteria (``[@criterion.dnsmos(), ...]``); None = all six, each with
            its defaults (`DEFAULT_CRITERIA`).
        workers: processes that measure clips; 0 = the cores this process may use.
        examples: dropped clips per criterion with a player on the report page.
        layout: ``metadata.csv`` columns as ``prepare.layout`` takes them ("auto": by count).
    """

    criteria: Sequence[Any] | None = None
    workers: int = 0
    examples: int = 6
    layout: str = "auto"

    def __attrs_post_init__(self) -> None:
        if self.workers < 0:
            raise ConfigError(f"Curation.workers = {self.workers}; give 0 (the cores) or more")
        if self.examples < 0:
            raise ConfigError(f"Curation.examples = {self.examples}; give 0 or more")

    def built_criteria(self) -> dict[str, Any]:
        """The criteria by registered name (``transcript_cer``, ...), in the given order.

        Raises:
            ConfigError: a value that is not a criterion, or one criterion given twice.
        """
        from flowkit import registry

        chosen = list(self.criteria) if self.criteria is not None else default_criteria()
        out: dict[str, Any] = {}
        for c in chosen:
            registry.check_kind(c, "criterion", where="Curation.criteria")
            name = registry.record_of(c)["name"] if attrs.has(type(c)) else type(c).__name__
            if name in out:
                raise ConfigError(f"Curation.criteria names criterion.{name} twice; give each once")
            out[name] = c
        if not out:
            raise ConfigError("Curation.criteria is empty; give at least one criterion (flowkit plugins criterion)")
        return out

    def resolved_workers(self) -> int:
        from flowkit.processes import usable_cores

        return self.workers or usable_cores()


@attrs.frozen
class CurationOutcome:
    """What a curation wrote and found."""

    out: Path
    clips: int
    kept: int
    dropped_by: dict[str, int]  # criterion -> clips it drops (a clip may count under several)
    unreadable: int
    rejected_lines: int  # lines of the source its importer rejected (not clips)
    audio_seconds: float
    measure_seconds: float  # wall seconds this call spent measuring
    measured_now: int
    notes: tuple[str, ...] = ()


def _lines(path: Path) -> int:
    """Whole lines of ``path`` (a torn last line not counted); 0 for no file."""
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def curate(sources: Sequence[Path], out: Path, *, settings: Curation | None = None, progress: bool = True,
           input_format: str = "auto") -> CurationOutcome:
    """Curate the clips of ``sources`` into the folder ``out`` (module docstring).

    Raises:
        DataError: a source that cannot be read, or one that lists no clip.
        ResumeError: ``out`` holds measures made with other judges.
        ConfigError: a criterion's judge cannot load, or bad settings.
    """
    from flowkit.curation.clips import info_of, read_source
    from flowkit.curation.decide import decide, write_lists
    from flowkit.curation.measure import measure_clips
    from flowkit.curation.page import write_page
    from flowkit.errors import DataError
    from flowkit.io import atomic_write_json

    settings = settings or Curation()
    criteria = settings.built_criteria()
    out = Path(out)
    items, rejected = read_source(sources, layout=settings.layout, input_format=input_format)
    if not items:
        raise DataError(f"{', '.join(map(str, sources))}: lists no clip ({len(rejected)} lines rejected); "
                        "nothing to curate")
    measured_before = _lines(out / "measures.jsonl")
    started = time.perf_counter()
    records = measure_clips(items, criteria, out, workers=settings.resolved_workers(), progress=progress)
    measure_seconds = time.perf_counter() - started
    infos = [info_of(i) for i in items]
    rows, decisions = decide(infos, records, criteria)
    write_lists(out, rows)
    dropped_by = Counter()
    for name, d in decisions.items():
        dropped_by[name] = sum(r is not None for r in d.reasons)
    unreadable = sum(1 for r in rows if not r.values and not r.keep)
    notes = tuple(n for d in decisions.values() for n in d.notes)
    audio_seconds = sum(r.seconds or 0.0 for r in rows)
    outcome = CurationOutcome(out, len(rows), sum(r.keep for r in rows), dict(dropped_by), unreadable,
                              len(rejected), audio_seconds, measure_seconds,
                              max(0, _lines(out / "measures.jsonl") - measured_before), notes)
    atomic_write_json(out / SUMMARY, {
        "sources": [str(s) for s in sources], "clips": outcome.clips, "kept": outcome.kept,
        "dropped": outcome.clips - outcome.kept, "dropped_by": outcome.dropped_by, "unreadable": unreadable,
        "rejected_lines": [r.to_dict() for r in rejected], "audio_seconds": round(audio_seconds, 3),
        "criteria": {name: c.describe() for name, c in criteria.items()},
        "thresholds": {name: [t.to_dict() for t in d.thresholds] for name, d in decisions.items()},
        "notes": list(notes),
    })
    write_page(out, rows, decisions, criteria, examples=settings.examples)
    return outcome
