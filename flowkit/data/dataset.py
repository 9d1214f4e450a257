"""Reading latent stores for training: validated segments of one split over one or more stores.

`LatentDataset.open` validates every segment and rejects bad ones with a reason rather
than failing a run hours in: non-finite latents (from the per-segment ``max_abs`` written
at prepare), too few or too many frames, empty text, a language outside ``languages``, inconsistent unit timings,
missing units when ``require_units`` (`flowkit.data.segment_checks`). Bad *stores* (damaged, incomplete, newer format,
not a store) raise `DataError` instead — there is nothing to salvage in them — and so do
bad *unions*: one store given twice, or stores of different encoders (another encoder,
the same at other settings, another latent width or frame rate).

Shape legend: n frames, d latent channels.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from flowkit.data.columns import ids_in
from flowkit.data.encoder_records import describe_record, record_params
from flowkit.data.segment_checks import store_rejections
from flowkit.data.shards import expand_stores
from flowkit.data.store import StoreReader
from flowkit.errors import DataError


@attrs.frozen
class SegmentInfo:
    """One accepted segment: where it lives and its metadata.

    ``units`` are ``(char_start, char_end, frame_start, frame_end)`` (ends exclusive) or
    None; ``units_estimated`` is True when an aligner guessed them (not a forced alignment).
    """

    store: int
    row: int
    segment_id: str
    speaker: str
    language: str
    emotion: str  # "" unknown
    intensity: float  # nan unknown
    rate: int  # 0 unknown, 1..5
    loudness: int  # 0 unknown, 1..5
    split: str
    text: str
    n_frames: int
    units: tuple[tuple[int, int, int, int], ...] | None = None
    units_estimated: bool = False
    #: the ``--data`` path the segment came from (the shards of one folder are one corpus);
    #: cross-segment pairing finds a speaker's other segments within a corpus
    corpus: int = attrs.field()

    @corpus.default
    def _corpus_is_store(self) -> int:
        return self.store


@attrs.frozen
class Rejection:
    """A segment left out at load, and why (one line of the run's data_rejections.jsonl)."""

    store: str
    segment_id: str
    reason: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        """The fields as a JSON-able dict."""
        return attrs.asdict(self)


@attrs.define
class LoadReport:
    """Counts of a load: segments in the chosen split, accepted, rejected by reason."""

    split: str | None
    stores: list[str]
    considered: int = 0
    accepted: int = 0
    rejections: list[Rejection] = attrs.Factory(list)

    def counts(self) -> dict[str, int]:
        """Rejected segments per reason, sorted by reason."""
        return dict(sorted(Counter(r.reason for r in self.rejections).items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "stores": list(self.stores),
            "considered": self.considered,
            "accepted": self.accepted,
            "rejected": len(self.rejections),
            "rejected_by_reason": self.counts(),
        }


def _given(stores: Sequence[str | os.PathLike[str]], corpus_of: Sequence[int], k: int, path: Path) -> str:
    """How the user named expanded store ``k``: the path given, or ``SHARD in FOLDER``."""
    raw = str(stores[corpus_of[k]])
    return raw if Path(raw) == Path(path) else f"{Path(path).name} in {raw}"


def _refuse_repeats(paths: Sequence[Path], given: Sequence[str]) -> None:
    """Refuse a store named twice (another spelling, a symlink, a shard also given in its
    folder): its segments would be read twice, silently doubling their weight.

    Raises:
        DataError: naming both spellings and the store they lead to.
    """
    seen: dict[Path, int] = {}
    for k, path in enumerate(paths):
        real = Path(os.path.realpath(path))
        if real in seen:
            first = seen[real]
            raise DataError(
                f"--data {given[first]} and --data {given[k]} are the same store ({real}); refused, not "
                "de-duplicated: give each store once (read twice, its segments would count double)"
            )
        seen[real] = k


def _encoder_of(reader: StoreReader) -> str:
    """``encoder.log_mel (16000 Hz, hop 160, 80 bins, Slaney mel), 80 channels at 100 Hz``."""
    record = reader.attrs.get("encoder")
    name = describe_record(record) if isinstance(record, dict) else "no encoder record"
    return f"{name}, {reader.latent_dim} channels at {reader.frame_rate:g} Hz"


def _refuse_mixed(readers: Sequence[StoreReader], given: Sequence[str]) -> None:
    """Refuse stores whose latents another encoder made than the first store's (or the
    same encoder at other settings, another width or frame rate): one model, one set of
    latent stats and one vocoder cannot serve both (``prepare --append`` refuses them too).

    Raises:
        DataError: naming both stores, their encoders and the first differing parameter.
    """
    first = readers[0]
    want = first.attrs.get("encoder")
    for k, reader in enumerate(readers[1:], start=1):
        record = reader.attrs.get("encoder")
        if (reader.latent_dim == first.latent_dim and math.isclose(reader.frame_rate, first.frame_rate)
                and record == want):
            continue
        a, b = _encoder_of(first), _encoder_of(reader)
        if a == b and isinstance(record, dict) and isinstance(want, dict):
            pa, pb = record_params(want), record_params(record)
            key = next((key for key in sorted(set(pa) | set(pb)) if pa.get(key) != pb.get(key)), None)
            if key is not None:
                a, b = f"{a}, {key} {pa.get(key)}", f"{b}, {key} {pb.get(key)}"
        raise DataError(
            f"--data mixes encoders: {given[0]} holds {a}; {given[k]} holds {b}. A run trains on one "
            f"encoder's latents: give stores prepared with the same --encoder and -b settings (prepare "
            f"{given[k]} again as {given[0]} was), or train on them in separate runs"
        )


class SegmentTable(Sequence[SegmentInfo]):
    """The accepted segments as columns: ``store`` int32 ``[N]``, ``row`` int64 ``[N]``,
    ``n_frames`` int64 ``[N]``, ``corpus`` int32 ``[N]``, and per store its `StoreReader`
    columns. ``table[i]`` builds segment ``i``'s `SegmentInfo` when asked, so a dataset of
    a million segments costs its arrays (tens of bytes a segment), not a million objects.
    """

    def __init__(self, readers: list[StoreReader], store: np.ndarray, row: np.ndarray,
                 corpus_of: Sequence[int]) -> None:
        self._readers = readers
        self.store = store.astype(np.int32, copy=False)
        self.row = row.astype(np.int64, copy=False)
        self.corpus = np.asarray(corpus_of, dtype=np.int32)[self.store] if len(store) else np.zeros(0, np.int32)
        self._corpus_of = list(corpus_of)
        lengths = [r.lengths for r in readers]
        self.n_frames = np.concatenate([lengths[s][self.row[self.store == s]] for s in range(len(readers))]) \
            if len(store) and np.all(np.diff(self.store) >= 0) else \
            np.asarray([readers[s].lengths[r] for s, r in zip(self.store.tolist(), self.row.tolist(), strict=True)],
                       dtype=np.int64)
        self._keys: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.store.shape[0])

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = int(index)
        if i < 0:
            i += len(self)
        s, r = int(self.store[i]), int(self.row[i])
        reader = self._readers[s]
        text = reader.strings
        num = reader.numeric
        return SegmentInfo(
            store=s, row=r, segment_id=text["segment_id"].value(r), speaker=text["speaker"].value(r),
            language=text["language"].value(r), emotion=text["emotion"].value(r), intensity=float(num["intensity"][r]),
            rate=int(num["rate"][r]), loudness=int(num["loudness"][r]), split=text["split"].value(r),
            text=text["text"].value(r), n_frames=int(self.n_frames[i]), units=reader.segment_units(r),
            units_estimated=bool(num["units_estimated"][r]), corpus=self._corpus_of[s],
        )

    def texts(self) -> Iterator[str]:
        """Each segment's text, in order (decoded one at a time)."""
        return self.field("text")

    def field(self, name: str) -> Iterator[str]:
        """Each segment's value of a string field (``language``, ``speaker``, ...), in order."""
        for s, r in zip(self.store.tolist(), self.row.tolist(), strict=True):
            yield self._readers[s].strings[name][r]

    def values(self, field: str) -> set[str]:
        """The distinct values of a string field (speaker, language, ...) over the segments."""
        out: set[str] = set()
        for s, reader in enumerate(self._readers):
            rows = self.row[self.store == s]
            if rows.size:
                names, codes = reader.categorical(field)
                out.update(names[c] for c in np.unique(codes[rows]).tolist())
        return out

    def speaker_keys(self) -> np.ndarray:
        """int64 ``[N]``: equal for segments of the same (corpus, speaker), -1 without a speaker."""
        if self._keys is None:
            ids: dict[tuple[int, str], int] = {}
            keys = np.full(len(self), -1, dtype=np.int64)
            for s, reader in enumerate(self._readers):
                where = np.nonzero(self.store == s)[0]
                if not where.size:
                    continue
                names, codes = reader.categorical("speaker")
                table = np.asarray([-1 if not n else ids.setdefault((self._corpus_of[s], n), len(ids)) for n in names],
                                   dtype=np.int64)
                keys[where] = table[codes[self.row[where]]]
            self._keys = keys
        return self._keys


class LatentDataset:
    """The accepted segments of one split over one or more stores.

    ``segments`` (a `SegmentTable`: a sequence of `SegmentInfo` kept as columns),
    ``lengths`` (int64 ``[N]`` frames), ``report``, ``latent_dim``, ``frame_rate`` (Hz),
    ``sample_rate`` (Hz), ``store_attrs`` (attributes of the first store), ``paths``. Not
    fork-safe after use: each DataLoader worker opens its own (pickling a dataset reopens
    its stores on the other side).
    """

    def __init__(self, readers: list[StoreReader], split: str | None, segments: SegmentTable,
                 report: LoadReport, options: dict[str, Any]) -> None:
        self._readers = readers
        self.split = split
        self.segments = segments
        self.lengths = segments.n_frames
        self.report = report
        self._options = options
        first = readers[0]
        self.latent_dim = first.latent_dim
        self.frame_rate = first.frame_rate
        self.sample_rate = first.sample_rate
        self.store_attrs = dict(first.attrs)
        self.paths = [r.path for r in readers]

    @classmethod
    def open(
        cls,
        stores: Sequence[str | os.PathLike[str]],
        split: str | None,
        *,
        min_frames: int = 8,
        max_frames: int | None = None,
        languages: Sequence[str] | None = None,
        require_units: bool = False,
    ) -> LatentDataset:
        """Open ``stores`` and keep the valid segments of ``split`` (None: every split).

        A path that is a folder of ``prepare --shard`` stores stands for all its shards.
        Every check is an array operation over the store's columns (a million segments
        open in about a second: docs/data-format.md).

        Raises:
            DataError: no store given, a store that cannot be read (see `StoreReader.open`),
                a shard folder with a shard missing or unfinished, the same store given
                twice (`_refuse_repeats`), or stores whose latents come from different
                encoders, widths or frame rates (`_refuse_mixed`).
        """
        if isinstance(stores, (str, os.PathLike)):
            stores = [stores]
        if not stores:
            raise DataError("no latent store given; pass at least one path built by `flowkit prepare`")
        paths, corpus_of = expand_stores(stores)  # a folder of --shard stores is their union
        given = [_given(stores, corpus_of, k, p) for k, p in enumerate(paths)]
        _refuse_repeats(paths, given)
        readers = [StoreReader.open(p) for p in paths]
        try:
            _refuse_mixed(readers, given)
        except DataError:
            for r in readers:
                r.close()
            raise
        report = LoadReport(split, [str(r.path) for r in readers])
        allowed = None if languages is None else set(languages)
        kept_store: list[np.ndarray] = []
        kept_row: list[np.ndarray] = []
        for index, reader in enumerate(readers):
            names, codes = reader.categorical("split")
            rows = np.arange(reader.n_segments) if split is None else \
                np.nonzero(ids_in(codes, names, {split}))[0]
            report.considered += int(rows.size)
            ids = reader.strings["segment_id"]
            reasons = store_rejections(reader, min_frames, max_frames, allowed, require_units)
            chosen = np.zeros(reader.n_segments, dtype=bool)
            chosen[rows] = True
            bad = [r for r in sorted(reasons) if chosen[r]]
            for row in bad:
                report.rejections.append(Rejection(str(reader.path), ids[row], *reasons[row]))
            keep = rows if not bad else np.setdiff1d(rows, np.asarray(bad, dtype=np.int64), assume_unique=True)
            kept_store.append(np.full(keep.size, index, dtype=np.int32))
            kept_row.append(keep.astype(np.int64))
        store_idx = np.concatenate(kept_store) if kept_store else np.zeros(0, dtype=np.int32)
        row_idx = np.concatenate(kept_row) if kept_row else np.zeros(0, dtype=np.int64)
        segments = SegmentTable(readers, store_idx, row_idx, corpus_of)
        report.accepted = len(segments)
        options = {"min_frames": min_frames, "max_frames": max_frames,
                   "languages": None if languages is None else sorted(languages), "require_units": require_units}
        return cls(readers, split, segments, report, options)

    def __len__(self) -> int:
        return len(self.segments)

    def why_empty(self) -> str:
        """One line saying why this dataset holds no segment, naming its stores (a shard
        folder once): they hold none, none is in ``split``, or loading rejected all of those.
        """
        from flowkit.data.shards import is_shard_folder

        names: list[str] = []
        for path in self.paths:
            name = str(path.parent if is_shard_folder(path.parent) else path)
            if name not in names:
                names.append(name)
        where = ", ".join(names)
        held = sum(r.n_segments for r in self._readers)
        split = self.split or "any"
        if held == 0:
            verb = "has" if len(names) == 1 else "have"
            return (f"{where} {verb} no segments (every clip of its prepare was rejected or the inputs listed "
                    "none): prepare it again from inputs with usable clips")
        if self.report.considered == 0:
            return (f"{where}: none of its {held} segments is in the {split} split; prepare the inputs again "
                    f"with {split} rows in their split column, or without one (prepare then assigns the split)")
        counts = ", ".join(f"{reason} {n}" for reason, n in self.report.counts().items())
        first = self.report.rejections[0] if self.report.rejections else None
        example = f"; e.g. {first.segment_id}: {first.detail}" if first is not None else ""
        return (f"{where}: all {self.report.considered} segments of the {split} split were rejected on loading "
                f"({counts}{example})")

    def read(self, indices: Sequence[int], *, as_stored: bool = False) -> list[np.ndarray]:
        """Latents of segments ``indices`` as float32 ``[n_i d]`` (``as_stored``: in their
        store's dtype, float16 or float32), in the order given.

        Each store is read once per call, sorted by position and coalesced.

        Raises:
            DataError: a segment holds non-finite latents although its ``max_abs`` (checked
                at open) is finite: the store was damaged after prepare.
        """
        out: list[np.ndarray | None] = [None] * len(indices)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        stores, rows = self.segments.store[idx].tolist(), self.segments.row[idx].tolist()
        by_store: dict[int, list[int]] = {}
        for k, s in enumerate(stores):
            by_store.setdefault(s, []).append(k)
        for store, ks in by_store.items():
            # the finite check is cheap next to a training step, and a NaN must not reach the model
            arrays = self._readers[store].read([rows[k] for k in ks], check_finite=True, as_stored=as_stored)
            for k, a in zip(ks, arrays, strict=True):
                out[k] = a
        return out  # type: ignore[return-value]

    def fingerprint(self) -> str:
        """sha256 of the store fingerprints, the split, the load options and the accepted segment ids."""
        h = hashlib.sha256()
        head = {"stores": [r.attrs["fingerprint"] for r in self._readers], "split": self.split, **self._options}
        h.update(json.dumps(head, sort_keys=True).encode("utf-8"))
        ids = [r.strings["segment_id"].tolist() for r in self._readers]
        for store, row in zip(self.segments.store.tolist(), self.segments.row.tolist(), strict=True):
            h.update(f"\n{store}\t{ids[store][row]}".encode())
        return h.hexdigest()

    def verify_stores(self) -> None:
        """Check every store as it is now against what prepare wrote: every latent chunk's
        checksum (or, for a store without checksums, its recomputed fingerprint).

        Raises:
            DataError: a store whose contents changed after prepare (names the chunk).
        """
        from flowkit.data.store import verify_store

        for reader in self._readers:
            verify_store(reader)

    def close(self) -> None:
        """Close every store's file handles."""
        for r in self._readers:
            r.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"paths": [str(p) for p in self.paths], "split": self.split, "options": self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        other = LatentDataset.open(state["paths"], state["split"], **state["options"])
        self.__dict__.update(other.__dict__)


__all__ = ["LatentDataset", "LoadReport", "Rejection", "SegmentInfo"]
