"""Measuring every clip with every criterion, in worker processes, resumable.

``DIR/measures.jsonl`` holds one line per clip, appended (and flushed to disk) as each
clip finishes: ``{"segment_id", "clip", "seconds", "measures": {criterion: {...}}}``, or
``"error": {"reason", "detail"}`` for audio that does not decode; ``clip`` is the clip's
`fingerprint` (transcript, language, audio). A run killed at any point leaves finished lines
and at most one torn last line, which the next run cuts off; clips with a line of the same
fingerprint are not measured again (a corrected transcript or replaced file is), a clip
measured before a criterion was added is measured again for that criterion only, and so is
a measure the criterion's present settings call stale (its ``stale`` method).
``DIR/judges.json`` records the judge of each criterion (model and package version);
measures of another judge are refused, since a new model's CER or score does not compare
with the old one's.

Work goes out in chunks of `CHUNK` clips of one language, cut from the whole source in its
order (so a run killed and run again measures the same chunks): a criterion that judges
many clips at once (``measure_many``: the recogniser packs short clips into one window,
`flowkit.judges.packing`) gets a chunk's clips together. A chunk's lines are appended together;
a chunk that a kill left incomplete is measured again whole, so its clips are heard beside
the same neighbours. Workers are spawned processes (`flowkit.data.workers.pool_map`), one
chunk at a time each on one thread: a clip's judges are small models whose threads would
only contend with the other workers for the cores.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from flowkit.data.manifest import Item
from flowkit.errors import ResumeError

__all__ = ["CHUNK", "JUDGES", "MEASURES", "chunks", "fingerprint", "measure_clips", "read_measures"]

MEASURES = "measures.jsonl"
JUDGES = "judges.json"
CHUNK = 16  # clips per job: about three packed Whisper windows of 2-3 s prompts

_WORKER: dict[str, Any] = {}


def read_measures(path: Path, *, repair: bool = False) -> dict[str, dict[str, Any]]:
    """The records of ``measures.jsonl`` by segment id (the last line of an id wins).

    A last line without its newline was torn by a kill: left out, and with ``repair`` cut
    from the file. A line that is not JSON elsewhere is skipped (its clip is measured again).
    """
    if not path.is_file():
        return {}
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data) and repair:
        with open(path, "r+b") as f:
            f.truncate(end)
    out: dict[str, dict[str, Any]] = {}
    for line in data[:end].splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("segment_id"), str):
            out[record["segment_id"]] = record
    return out


def _init_worker(criteria: dict[str, Any]) -> None:
    from threadpoolctl import threadpool_limits

    from flowkit.batching.host_memory import keep_freed_memory

    keep_freed_memory()  # the judges' window-sized arrays reuse freed memory instead of faulting it in

    _WORKER["limits"] = threadpool_limits(1)
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a core dependency
        pass
    _WORKER["criteria"] = criteria


def _measure_chunk(job: tuple[list[Item], tuple[str, ...]]) -> list[dict[str, Any]]:
    """Every wanted criterion's measures of a chunk of clips (runs in a worker)."""
    from flowkit.curation.clips import load_clip
    from flowkit.data.audio import AudioError

    items, wanted = job
    results: list[dict[str, Any]] = []
    clips = []
    for item in items:
        try:
            clips.append(load_clip(item))
            results.append({"segment_id": item.segment_id, "clip": fingerprint(item), "measures": {}})
        except AudioError as exc:
            results.append({"segment_id": item.segment_id, "clip": fingerprint(item),
                            "error": {"reason": exc.reason, "detail": exc.detail}})
    measured = [r for r in results if "error" not in r]
    for record, clip in zip(measured, clips, strict=True):
        record["seconds"] = round(clip.audio.size / clip.sample_rate, 4)
    criteria = _WORKER["criteria"]
    for name in wanted:
        criterion = criteria[name]
        if hasattr(criterion, "measure_many"):
            values = criterion.measure_many(clips)
        else:
            values = [criterion.measure(clip) for clip in clips]
        for record, value in zip(measured, values, strict=True):
            record["measures"][name] = value
    return results


def fingerprint(item: Item) -> str:
    """What a clip's measures depend on, hashed: its transcript, language and audio (the
    file's path and size, or the dataset row it comes from). A clip whose fingerprint differs
    from the one its measures were taken with (a corrected transcript, a replaced file, another
    corpus's clip of the same id in the same ``--out``) is measured again."""
    import hashlib

    audio = item.audio
    if isinstance(audio, Path):
        try:
            audio = f"{audio.resolve()}:{audio.stat().st_size}"
        except OSError:
            audio = str(audio)
    key = "\0".join((item.text, item.language or "", str(audio)))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def chunks(items: Sequence[Item], size: int = CHUNK) -> list[list[Item]]:
    """``items`` cut into runs of at most ``size`` clips of one language: the languages in
    order of first appearance, each language's clips in source order."""
    by_language: dict[str, list[Item]] = {}
    for item in items:
        by_language.setdefault(item.language or "", []).append(item)
    return [clips[i:i + size] for clips in by_language.values() for i in range(0, len(clips), size)]


def _stale(criterion: Any, measure: Any) -> bool:
    """Whether ``criterion`` must take ``measure`` again under its present settings (its
    ``stale`` method: a packed hearing over a lowered floor is heard again alone)."""
    return bool(getattr(criterion, "stale", None) and criterion.stale(measure))


def _judges_of(criteria: dict[str, Any]) -> dict[str, Any]:
    return {name: c.describe().get("judge") for name, c in criteria.items()}


def _difference(old: Any, new: Any) -> str:
    """``"pack_gap_s 1.0 -> None"``: the entries of two judge records that differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = [k for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
        return ", ".join(f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys)
    return f"{old!r} -> {new!r}"


def _check_judges(out: Path, criteria: dict[str, Any]) -> None:
    """Refuse measures made with other judges; record the judges on a fresh start.

    Raises:
        ResumeError: a criterion's judge differs from the one ``DIR/judges.json`` records.
    """
    from flowkit.io import atomic_write_json

    path = out / JUDGES
    now = _judges_of(criteria)
    old: dict[str, Any] = {}
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            old = {}
        for name, judge in now.items():
            if name in old and old[name] != judge:
                raise ResumeError(
                    f"{out / MEASURES} holds {name} measures made with another judge "
                    f"({_difference(old[name], judge)}); give another --out, or delete {out / MEASURES} and "
                    f"{path} to measure again")
    atomic_write_json(path, {**old, **now})


def _append(f: Any, records: list[dict[str, Any]]) -> None:
    f.write("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records))
    f.flush()
    os.fsync(f.fileno())


def _results(jobs: list[tuple[list[Item], tuple[str, ...]]], criteria: dict[str, Any],
             workers: int) -> Iterator[list[dict[str, Any]]]:
    if workers <= 1:
        from threadpoolctl import threadpool_limits

        _WORKER["criteria"] = criteria
        with threadpool_limits(1):
            for job in jobs:
                yield _measure_chunk(job)
        return
    from flowkit.data.workers import pool_map

    yield from pool_map(_measure_chunk, jobs, workers, initializer=_init_worker, initargs=(criteria,), chunksize=1)


def measure_clips(items: Sequence[Item], criteria: dict[str, Any], out: Path, *, workers: int = 1,
                  progress: bool = True) -> dict[str, dict[str, Any]]:
    """Measure ``items`` with ``criteria`` (name -> criterion) into ``out/measures.jsonl``;
    returns every clip's record by segment id (those measured before included).

    Raises:
        ResumeError: ``out`` holds measures of another judge.
        ConfigError: a criterion's judge cannot load (its package or model missing).
    """
    import contextlib
    import time

    from flowkit.console import Progress
    from flowkit.data.workers import sigterm_as_interrupt

    out.mkdir(parents=True, exist_ok=True)
    _check_judges(out, criteria)
    path = out / MEASURES
    done = read_measures(path, repair=True)
    names = tuple(criteria)
    jobs = []
    for chunk in chunks(items):
        missing: set[str] = set()
        for item in chunk:
            record, clip = done.get(item.segment_id), fingerprint(item)
            if record is None or record.get("clip", clip) != clip:
                missing.update(names)
            elif "error" not in record:
                measures = record.get("measures", {})
                missing.update(n for n in names if n not in measures or _stale(criteria[n], measures[n]))
        if missing:
            jobs.append((chunk, tuple(n for n in names if n in missing)))
    todo = sum(len(chunk) for chunk, _ in jobs)
    started, audio_s = time.perf_counter(), 0.0
    with Progress("curate", total=len(items), completed=len(items) - todo, unit="clips",
                  plain_every=max(1, len(items) // 10), enabled=progress) as bar, sigterm_as_interrupt(), \
            open(path, "a", encoding="utf-8") as f, contextlib.closing(_results(jobs, criteria, workers)) as results:
        for (chunk, _), records in zip(jobs, results, strict=True):
            for record in records:
                before = done.get(record["segment_id"])
                if before is not None and before.get("clip", record["clip"]) != record["clip"]:
                    before = None  # another clip under this id: nothing of the old one is kept
                if before is not None and "measures" in record:  # measured again: keep what it had
                    record["measures"] = {**before.get("measures", {}), **record["measures"]}
                audio_s += float(record.get("seconds", 0.0))
            _append(f, records)
            for record in records:
                done[record["segment_id"]] = record
            bar.update(len(chunk), xrt=audio_s / max(time.perf_counter() - started, 1e-9))
    return done
