"""`flowkit prepare`: audio + transcripts -> a latent store.

The parent process reads the inputs, hands clips to worker processes (spawn context;
workers decode, resample, measure and encode, and never touch zarr) and writes their
results into the store in input order, so the same inputs always give the same store
and fingerprint. Bad input never stops the run: each skipped clip is a `Rejection`
with a reason, written to ``<store>/rejections.jsonl`` and counted in the summary. A run
that rejects every clip publishes no store (exit 3, the reasons in ``<store>.rejections.jsonl``).

Settings are the gin configurable ``prepare`` (`flowkit.data.prepare_settings`, e.g.
``-b "prepare.max_seconds = 12"``); the workers' side is `flowkit.data.prepare_worker`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.data import aligners as _aligners  # noqa: F401  registers aligner.energy
from flowkit.data import encoders as _encoders  # noqa: F401  registers encoder.log_mel
from flowkit.data.importers import read_inputs
from flowkit.data.locks import StoreLock
from flowkit.data.manifest import Item, Rejection
from flowkit.data.prepare_settings import PrepareSettings
from flowkit.data.prepare_worker import init_worker, process_item
from flowkit.data.shards import shard_of, shard_store_path
from flowkit.data.store import (
    REJECTIONS_FILE,
    SegmentRecord,
    StoreReader,
    StoreWriter,
)
from flowkit.data.workers import pool_map, sigterm_as_interrupt
from flowkit.errors import DataError


@attrs.define
class PrepareSummary:
    """What a prepare run did; `table_rows` feeds the printed summary."""

    store: Path
    accepted: int = 0
    rejected: Counter = attrs.Factory(Counter)
    warnings: Counter = attrs.Factory(Counter)
    audio_seconds: float = 0.0  # accepted audio
    decoded_seconds: float = 0.0  # every clip decoded, accepted or not
    wall_seconds: float = 0.0
    total_segments: int = 0  # in the store after this run
    fingerprint: str = ""
    skipped: bool = False  # a shard found complete: nothing was decoded
    #: segments in the store after this run per speaker and split: {speaker: {"train": n, "val": n}}
    splits: dict[str, Counter] = attrs.Factory(dict)
    #: segments written by this run whose split the input gave, per speaker
    given_splits: Counter = attrs.Factory(Counter)
    #: lines the command prints as warnings (e.g. a shard that holds no segment)
    notes: list[str] = attrs.Factory(list)

    @property
    def speed(self) -> float:
        """Decoded audio seconds per wall second (a multiple of real time)."""
        return self.decoded_seconds / self.wall_seconds if self.wall_seconds > 0 else math.inf

    def table_rows(self) -> list[tuple[str, str]]:
        if self.skipped:
            return [("shard", "already complete: nothing to do"), ("segments in store", str(self.total_segments)),
                    ("store", str(self.store))]
        rows = [("accepted", str(self.accepted))]
        rows += [(f"rejected: {reason}", str(n)) for reason, n in sorted(self.rejected.items())]
        rows += [(f"warning: {reason}", str(n)) for reason, n in sorted(self.warnings.items())]
        rows += [
            ("accepted audio", f"{self.audio_seconds / 3600:.3f} h"),
            ("speed", f"{self.speed:.0f}x real time ({self.wall_seconds:.1f} s)"),
            ("segments in store", str(self.total_segments)),
        ]
        rows += self.split_rows()
        rows.append(("store", str(self.store)))
        return rows

    def split_rows(self) -> list[tuple[str, str]]:
        """The train/val split per speaker (one row in all beyond `SPLIT_ROWS` speakers)."""
        if len(self.splits) > SPLIT_ROWS:
            train = sum(c["train"] for c in self.splits.values())
            val = sum(c["val"] for c in self.splits.values())
            return [("split", f"{len(self.splits)} speakers: train {train}, val {val}")]
        return [(f"split: {speaker or '(no speaker)'}", f"train {c['train']}, val {c['val']}")
                for speaker, c in sorted(self.splits.items())]

    def split_warnings(self) -> list[str]:
        """One line per speaker whose segments all sit in one split (the first `SPLIT_ROWS`, then a count)."""
        lines = []
        for speaker, c in sorted(self.splits.items()):
            if self.given_splits[speaker] == c["train"] + c["val"]:
                continue  # the input chose every split of this voice
            if c["val"] == 0:
                lines.append(f"speaker {speaker!r} has all its {c['train']} segments in train: no validation clip "
                             "of this voice (give the input a split column, or raise prepare.min_val_per_speaker)")
            elif c["train"] == 0:
                lines.append(f"speaker {speaker!r} has all its {c['val']} segments in val: the model never "
                             "trains on this voice (give the input a split column)")
        if len(lines) > SPLIT_ROWS:
            lines = [*lines[:SPLIT_ROWS],
                     f"... and {len(lines) - SPLIT_ROWS} more speakers with all segments in one split"]
        return lines


#: speakers listed one row each in the prepare summary
SPLIT_ROWS = 20


def split_hash(segment_id: str) -> float:
    """A uniform number in [0, 1) fixed by the segment id (the split does not depend on order)."""
    return int.from_bytes(hashlib.sha256(segment_id.encode("utf-8")).digest()[:8], "big") / 2.0**64


def plan_splits(items: Sequence[Item], settings: PrepareSettings, speakers_with_val: set[str]) -> dict[str, str]:
    """The split of every listed item, keyed by segment id, planned before any audio is decoded.

    An explicit split wins; else "val" when `split_hash` < ``val_fraction``. Each speaker
    with more than ``min_val_per_speaker`` listed items (and no val segment yet in the
    store) then gets at least that many val items: those of smallest hash. Planned from
    the listing, not from the accepted clips, so every shard of a sharded prepare (which
    reads the whole listing but decodes only its part) plans the same split; a val item
    rejected later leaves its speaker one val segment short.
    """
    splits: dict[str, str] = {}
    by_speaker: dict[str, list[tuple[float, str]]] = {}
    explicit_val: Counter[str] = Counter()
    for item in items:
        if item.split is not None:
            splits[item.segment_id] = item.split
            explicit_val[item.speaker] += item.split == "val"
            continue
        h = split_hash(item.segment_id)
        splits[item.segment_id] = "val" if h < settings.val_fraction else "train"
        by_speaker.setdefault(item.speaker, []).append((h, item.segment_id))
    want = settings.min_val_per_speaker
    for speaker, rows in by_speaker.items():
        if speaker in speakers_with_val or len(rows) <= want:
            continue
        need = want - sum(1 for _, sid in rows if splits[sid] == "val") - explicit_val[speaker]
        for _, sid in sorted(r for r in rows if splits[r[1]] != "val")[: max(0, need)]:
            splits[sid] = "val"
    return splits


def _results(items: list[Item], workers: int, init_args: tuple) -> Iterator[dict[str, Any]]:
    if workers <= 1:
        from threadpoolctl import threadpool_limits

        init_worker(*init_args, limit_threads=False)
        with threadpool_limits(1):  # scoped: the caller's process keeps its own setting after
            for item in items:
                yield process_item(item)
        return
    # spawn: zarr's event-loop thread makes forking after zarr use unsafe (design.md section 3);
    # the workers exit with this process, however it ends (flowkit.data.workers)
    yield from pool_map(process_item, items, workers, initializer=init_worker, initargs=init_args)


def _default_encoder() -> Any:
    from flowkit.registry import get

    return get("encoder", "log_mel").obj()


def prepare_store(
    inputs: Sequence[Path],
    out: Path,
    *,
    settings: PrepareSettings | None = None,
    workers: int = 1,
    append: bool = False,
    textgrids: Path | None = None,
    progress: bool = True,
    input_format: str = "auto",
    shard: tuple[int, int] | None = None,
    keep: Path | None = None,
) -> PrepareSummary:
    """Build (or, with ``append``, extend) the store ``out`` from ``inputs``.

    ``input_format`` is one of `flowkit.data.importers.FORMATS` ("auto": by what each input
    is). ``shard=(i, n)`` makes ``out`` a folder and writes only the i-th of n parts, to
    ``out/shard-<i>-of-<n>.zarr`` (`flowkit.data.shards`); a shard already complete there
    is left as it is and reported as skipped. ``keep``: a list of segment ids (`read_keep_list`,
    e.g. ``flowkit curate``'s ``keep.lst``); items of the inputs not on it are rejected as
    ``curated_out`` (listed in the rejections like any other, never decoded).

    One writer per store: ``<out>.lock`` (`flowkit.data.locks`) is held for the whole run.
    When no segment is left to publish, nothing is: the rejections go to
    ``<out>.rejections.jsonl`` beside it and a `DataError` says so. A shard is the exception
    when the whole listing has items but none of its part survives: it is published empty
    (the shard folder is complete only with all N), with a line in ``summary.notes``.

    Raises:
        DataError: an input that cannot be read at all, ``out`` existing without
            ``append``, a store to append to that is invalid or has another encoder,
            ``shard`` with ``append``, ``shard`` with ``out`` a store, another prepare
            writing ``out`` (or the shard) now, every item of the inputs rejected, or a
            ``keep`` list that is missing or lists no id.
    """
    settings = settings or PrepareSettings()
    keep_ids = read_keep_list(Path(keep)) if keep is not None else None
    encoder = settings.encoder if settings.encoder is not None else _default_encoder()
    aligner = settings.aligner
    out = Path(out)
    if textgrids is not None:
        if not Path(textgrids).is_dir():
            raise DataError(f"--textgrids {textgrids}: no such folder")
        try:
            import praatio  # noqa: F401
        except ImportError:
            raise DataError("--textgrids needs praatio: pip install 'flowkit[textgrid]'") from None
    started = time.perf_counter()
    if shard is not None:
        if append:
            raise DataError("--shard and --append do not go together: a sharded prepare writes new shard stores; "
                            "prepare new data into another --out folder and give both to --data")
        if (out / "zarr.json").is_file() or (out.exists() and not out.is_dir()):
            raise DataError(f"--out {out} is a store or a file; "
                            "with --shard, --out names the folder that holds the shards")
        folder, out = out, shard_store_path(out, *shard)
        what, retry = f"shard {shard[0]}/{shard[1]} of {folder}", "or run another --shard"
    else:
        what, retry = str(out), "or give another --out"
    if append and not out.exists():  # zarr would create an empty group there (zarr-python #3364)
        raise DataError(f"--append {out}: no such store; to create it, run the same command without --append")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"--out {out}: cannot create the folder {out.parent} ({exc.strerror})") from None
    with StoreLock.acquire(out, what, retry):  # one writer per store or shard
        if shard is not None and (out / "zarr.json").is_file():
            reader = StoreReader.open(out)  # a complete shard of an earlier run: nothing to redo
            done = PrepareSummary(out, total_segments=reader.n_segments, fingerprint=reader.attrs["fingerprint"],
                                  skipped=True, wall_seconds=time.perf_counter() - started)
            reader.close()
            return done
        return _write_store(inputs, out, settings, encoder, aligner, workers, append, textgrids, progress,
                            input_format, shard, started, keep_ids, keep)


def _write_store(inputs: Sequence[Path], out: Path, settings: PrepareSettings, encoder: Any, aligner: Any,
                 workers: int, append: bool, textgrids: Path | None, progress: bool, input_format: str,
                 shard: tuple[int, int] | None, started: float, keep_ids: frozenset[str] | None = None,
                 keep: Path | None = None) -> PrepareSummary:
    """`prepare_store`'s work once the lock of ``out`` is held."""
    from flowkit.console import Progress

    summary = PrepareSummary(out)
    rejections: list[Rejection] = []

    encoder_name = _registered_name("encoder", encoder)
    if append:
        writer = StoreWriter.append_to(out)
        enc = writer.attrs["encoder"]
        if enc["params"] != _jsonable(encoder.params()) or enc["name"] != encoder_name:
            raise DataError(
                f"{out} was prepared with encoder {enc['name']} {enc['params']}; append with the same "
                "encoder settings (check --encoder and -b bindings)"
            )
    else:
        writer = StoreWriter.create(
            out, encoder_name=encoder_name, encoder_params=_jsonable(encoder.params()),
            frame_rate=float(encoder.frame_rate), sample_rate=int(encoder.sample_rate),
            latent_dim=int(encoder.latent_dim), latent_dtype=settings.latent_dtype,
            chunk_frames=settings.chunk_frames,
            extra_attrs={"aligner": None if aligner is None else _registered_name("aligner", aligner),
                         **({"shard": {"index": shard[0], "count": shard[1]}} if shard else {})},
        )
    try:
        items: list[Item] = []
        seen = set(writer.segment_ids)
        listed: list[Item | Rejection] = []
        for entry in read_inputs([Path(p) for p in inputs], settings.layout, settings.default_speaker,
                                 settings.default_language, settings.languages, input_format):
            if isinstance(entry, Rejection):
                listed.append(entry)
            elif entry.segment_id in seen:
                listed.append(Rejection(entry.segment_id, "duplicate_id", "segment id already used", entry.source))
            elif keep_ids is not None and entry.segment_id not in keep_ids:
                listed.append(Rejection(entry.segment_id, "curated_out", f"not in --keep {keep}", entry.source))
            else:
                seen.add(entry.segment_id)
                items.append(entry)
                listed.append(entry)
        if not items:  # nothing to decode in any shard: the same answer for every one
            _refuse_empty(out, inputs, [e for e in listed if isinstance(e, Rejection)], append)
        # planned from the whole listing: every shard plans the same split
        for (speaker, split), n in _store_splits(writer).items():
            summary.splits.setdefault(speaker, Counter())[split] += n
        splits = plan_splits(items, settings, {sp for sp, c in summary.splits.items() if c["val"]})
        if shard is not None:  # keep this part's items and rejections (those without an id go to part 0)
            mine = [e for e in listed if (shard_of(e.segment_id, shard[1]) if e.segment_id else 0) == shard[0]]
            items = [e for e in mine if isinstance(e, Item)]
            rejections += [e for e in mine if isinstance(e, Rejection)]
        else:
            rejections += [e for e in listed if isinstance(e, Rejection)]
        del listed
        init_args = (settings, encoder, aligner, Path(textgrids) if textgrids else None)
        with Progress("prepare", total=len(items), unit="clips", plain_every=max(1, len(items) // 10),
                      enabled=progress) as bar, sigterm_as_interrupt(), \
                contextlib.closing(_results(items, workers, init_args)) as results:
            for item, result in zip(items, results, strict=True):
                summary.decoded_seconds += result["seconds"]
                if "rejection" in result:
                    rejections.append(result["rejection"])
                else:
                    writer.add(SegmentRecord(
                        segment_id=item.segment_id, speaker=item.speaker, language=item.language,
                        emotion=item.emotion, intensity=item.intensity, rate=result["rate"],
                        loudness=result["loudness"], split=splits[item.segment_id], text=item.text,
                        latents=result["latents"],
                        units=result["units"], units_estimated=result["units_estimated"],
                    ))
                    summary.accepted += 1
                    summary.splits.setdefault(item.speaker, Counter())[splits[item.segment_id]] += 1
                    summary.given_splits[item.speaker] += item.split is not None
                    summary.audio_seconds += result["seconds"]
                    if result["warning"]:
                        summary.warnings[result["warning"]] += 1
                elapsed = time.perf_counter() - started
                bar.update(1, ok=summary.accepted, rejected=len(rejections),
                           xrt=summary.decoded_seconds / max(elapsed, 1e-9))
        if summary.accepted == 0:
            if shard is None:
                _refuse_empty(out, inputs, rejections, append)
            # an empty shard is published all the same: the folder is complete only with all N
            summary.notes.append(
                f"shard {shard[0]}/{shard[1]} holds no segment: "
                + (f"all {len(rejections)} of its items were rejected ({_top_reasons(rejections)}); see "
                   f"{out / REJECTIONS_FILE}" if rejections else "no item of the inputs falls in this part"))
        _write_rejections(writer, rejections)
        final = writer.commit()
    except BaseException:
        writer.abort()
        raise
    failed = rejections_beside(out)
    if failed.is_file():  # the rejections of an earlier run that published nothing
        failed.unlink()
    summary.store = final
    summary.rejected = Counter(r.reason for r in rejections)
    summary.total_segments = writer.n0
    summary.fingerprint = writer.fingerprint
    summary.wall_seconds = time.perf_counter() - started
    return summary


def read_keep_list(path: Path) -> frozenset[str]:
    """The segment ids of a keep list: one id a line; blank lines and ``#`` comments are skipped.

    Raises:
        DataError: the file is missing or unreadable, or lists no id.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"--keep {path}: cannot read it ({exc.strerror}); give the keep.lst that flowkit curate "
                        "wrote") from None
    ids = frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#"))
    if not ids:
        raise DataError(f"--keep {path} lists no segment id: nothing would be kept; check the curation's "
                        "decisions.csv, or leave --keep out")
    return ids


def rejections_beside(store: Path) -> Path:
    """``<store>.rejections.jsonl``: where a prepare that publishes nothing writes its rejections."""
    return store.with_name(store.name + ".rejections.jsonl")


def _top_reasons(rejections: Sequence[Rejection], most: int = 4) -> str:
    counts = Counter(r.reason for r in rejections).most_common()
    text = ", ".join(f"{reason} {n}" for reason, n in counts[:most])
    return text + (f" and {len(counts) - most} more reasons" if len(counts) > most else "")


def _refuse_empty(out: Path, inputs: Sequence[Path], rejections: Sequence[Rejection], append: bool) -> None:
    """Raise the `DataError` of a prepare with no segment to publish, its rejections written beside ``out``.

    Raises:
        DataError: always.
    """
    from flowkit.io import atomic_write_text

    outcome = f"nothing was added to {out}" if append else f"no store was written at {out}"
    if not rejections:
        raise DataError(f"{', '.join(map(str, inputs))}: the inputs list no clip; {outcome}")
    path = rejections_beside(out)
    atomic_write_text(path, "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in rejections))
    raise DataError(f"all {len(rejections)} items of the inputs were rejected ({_top_reasons(rejections)}); "
                    f"{outcome}; the reason of each is in {path}")


def _store_splits(writer: StoreWriter) -> Counter:
    """Segments already in the store being appended to, per ``(speaker, split)``."""
    if writer.new or writer.n0 == 0:
        return Counter()
    reader = StoreReader.open(writer.final_path)
    try:
        return Counter(zip(reader.strings["speaker"], reader.strings["split"], strict=True))
    finally:
        reader.close()


def _write_rejections(writer: StoreWriter, rejections: list[Rejection]) -> None:
    from flowkit.io import atomic_write_text

    path = writer.path / REJECTIONS_FILE
    old = path.read_text(encoding="utf-8") if path.is_file() else ""
    lines = "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in rejections)
    atomic_write_text(path, old + lines)


def _registered_name(kind: str, component: Any) -> str:
    from flowkit.registry import components

    for c in components(kind):
        if isinstance(component, c.obj):
            return c.name
    return type(component).__name__


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


__all__ = ["PrepareSettings", "PrepareSummary", "plan_splits", "prepare_store", "read_keep_list"]
