"""Reading latent stores for training: validated segments of one split over one or more stores.

`LatentDataset.open` validates every segment and rejects bad ones with a reason rather
than failing a run hours in: non-finite latents (from the per-segment ``max_abs`` written
at prepare), a latent dim or frame rate that differs from the first store's, too few or
too many frames, empty text, a language outside ``languages``, inconsistent unit timings,
missing units when ``require_units``. Bad *stores* (damaged, incomplete, newer format,
not a store) raise `DataError` instead — there is nothing to salvage in them.

Shape legend: n frames, d latent channels.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

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


def unit_problems(units: np.ndarray, text_len: int, n_frames: int) -> str | None:
    """Why unit timings ``[u 4]`` are inconsistent with a text and frame count, or None when fine."""
    if units.shape[0] == 0:
        return "no units"
    cs, ce, fs, fe = units.T.astype(np.int64)
    if (cs < 0).any() or (ce > text_len).any() or (cs >= ce).any():
        return f"char span outside the text (0..{text_len}) or empty"
    if (fs < 0).any() or (fe > n_frames).any() or (fs >= fe).any():
        return f"frame span outside 0..{n_frames} or empty"
    if (cs[1:] < ce[:-1]).any() or (fs[1:] < fe[:-1]).any():
        return "units overlap or are out of order"
    return None


class LatentDataset:
    """The accepted segments of one split over one or more stores.

    ``segments`` (list of `SegmentInfo`), ``lengths`` (int64 ``[N]`` frames), ``report``,
    ``latent_dim``, ``frame_rate`` (Hz), ``sample_rate`` (Hz), ``store_attrs`` (attributes
    of the first store), ``paths``. Not fork-safe after use: each DataLoader worker
    opens its own (pickling a dataset reopens its stores on the other side).
    """

    def __init__(self, readers: list[StoreReader], split: str | None, segments: list[SegmentInfo],
                 report: LoadReport, options: dict[str, Any]) -> None:
        self._readers = readers
        self.split = split
        self.segments = segments
        self.lengths = np.asarray([s.n_frames for s in segments], dtype=np.int64)
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

        Raises:
            DataError: no store given, a store that cannot be read (see `StoreReader.open`),
                or a shard folder with a shard missing or unfinished.
        """
        if isinstance(stores, (str, os.PathLike)):
            stores = [stores]
        if not stores:
            raise DataError("no latent store given; pass at least one path built by `flowkit prepare`")
        paths, corpus_of = expand_stores(stores)  # a folder of --shard stores is their union
        readers = [StoreReader.open(p) for p in paths]
        report = LoadReport(split, [str(r.path) for r in readers])
        segments: list[SegmentInfo] = []
        first = readers[0]
        allowed = None if languages is None else set(languages)
        for index, reader in enumerate(readers):
            rows = [i for i, s in enumerate(reader.strings["split"]) if split is None or s == split]
            report.considered += len(rows)
            store_problem = None
            if reader.latent_dim != first.latent_dim:
                store_problem = ("wrong_dim", f"latent dim {reader.latent_dim} != {first.latent_dim} of {first.path}")
            elif not math.isclose(reader.frame_rate, first.frame_rate):
                store_problem = ("wrong_frame_rate", f"{reader.frame_rate} Hz != {first.frame_rate} Hz of {first.path}")
            elif reader.attrs.get("encoder") != first.attrs.get("encoder"):
                # same shape, other features (another mel scale, fmax, FFT ...): one vocoder and
                # one set of latent stats cannot serve both
                store_problem = ("wrong_encoder", f"encoder {reader.attrs.get('encoder')} != {first.attrs.get('encoder')} "
                                                  f"of {first.path}")
            ids = reader.strings["segment_id"]
            if store_problem is not None:
                report.rejections += [Rejection(str(reader.path), ids[i], *store_problem) for i in rows]
                continue
            bad_units = cls._check_units(reader)
            for row in rows:
                reason = cls._check_segment(reader, row, min_frames, max_frames, allowed, require_units, bad_units)
                if reason is not None:
                    report.rejections.append(Rejection(str(reader.path), ids[row], *reason))
                    continue
                segments.append(SegmentInfo(
                    store=index, row=row, segment_id=ids[row], speaker=reader.strings["speaker"][row],
                    language=reader.strings["language"][row], emotion=reader.strings["emotion"][row],
                    intensity=float(reader.numeric["intensity"][row]), rate=int(reader.numeric["rate"][row]),
                    loudness=int(reader.numeric["loudness"][row]), split=reader.strings["split"][row],
                    text=reader.strings["text"][row], n_frames=int(reader.lengths[row]),
                    units=reader.segment_units(row), units_estimated=bool(reader.numeric["units_estimated"][row]),
                    corpus=corpus_of[index],
                ))
        report.accepted = len(segments)
        options = {"min_frames": min_frames, "max_frames": max_frames,
                   "languages": None if languages is None else sorted(languages), "require_units": require_units}
        return cls(readers, split, segments, report, options)

    @staticmethod
    def _check_units(reader: StoreReader) -> dict[int, str]:
        """Row -> problem for every segment whose stored unit timings are inconsistent.

        Vectorised over all units of the store (100k segments in well under a second);
        `unit_problems` words the reason for the few bad ones.
        """
        n = reader.n_segments
        counts = np.diff(reader.unit_offsets)
        has = reader.numeric["has_units"].astype(bool)
        seg = np.repeat(np.arange(n), counts)
        cs, ce, fs, fe = reader.units.astype(np.int64).T
        text_len = np.fromiter((len(t) for t in reader.strings["text"]), dtype=np.int64, count=n)
        bad_unit = (cs < 0) | (ce > text_len[seg]) | (cs >= ce) | (fs < 0) | (fe > reader.lengths[seg]) | (fs >= fe)
        bad = np.zeros(n, dtype=bool)
        bad[seg[bad_unit]] = True
        same = seg[1:] == seg[:-1]
        overlap = same & ((cs[1:] < ce[:-1]) | (fs[1:] < fe[:-1]))
        bad[seg[1:][overlap]] = True
        bad |= has & (counts == 0)
        problems: dict[int, str] = {}
        for row in np.nonzero(bad & has)[0].tolist():
            block = reader.units[reader.unit_offsets[row] : reader.unit_offsets[row + 1]]
            problems[row] = unit_problems(block, int(text_len[row]), int(reader.lengths[row])) or "inconsistent units"
        return problems

    @staticmethod
    def _check_segment(reader: StoreReader, row: int, min_frames: int, max_frames: int | None,
                       languages: set[str] | None, require_units: bool, bad_units: dict[int, str]) -> tuple[str, str] | None:
        max_abs = float(reader.numeric["max_abs"][row])
        if not math.isfinite(max_abs):
            return "non_finite", f"latents hold non-finite values (max |x| = {max_abs})"
        n = int(reader.lengths[row])
        if n < min_frames:
            return "too_short", f"{n} frames < min_frames {min_frames}"
        if max_frames is not None and n > max_frames:
            return "too_long", f"{n} frames > max_frames {max_frames}"
        if not reader.strings["text"][row].strip():
            return "empty_text", "the text is empty"
        if languages is not None and reader.strings["language"][row] not in languages:
            return "unknown_language", f"language {reader.strings['language'][row]!r} not in {sorted(languages)}"
        if row in bad_units:
            return "bad_units", bad_units[row]
        if require_units and not reader.numeric["has_units"][row]:
            return "missing_units", "no unit timings (prepare with --textgrids or --align energy)"
        return None

    def __len__(self) -> int:
        return len(self.segments)

    def read(self, indices: Sequence[int]) -> list[np.ndarray]:
        """Latents of segments ``indices`` as float32 ``[n_i d]``, in the order given.

        Each store is read once per call, sorted by position and coalesced.

        Raises:
            DataError: a segment holds non-finite latents although its ``max_abs`` (checked
                at open) is finite: the store was damaged after prepare.
        """
        out: list[np.ndarray | None] = [None] * len(indices)
        by_store: dict[int, list[int]] = {}
        for k, i in enumerate(indices):
            by_store.setdefault(self.segments[i].store, []).append(k)
        for store, ks in by_store.items():
            arrays = self._readers[store].read([self.segments[indices[k]].row for k in ks])
            for k, a in zip(ks, arrays, strict=True):
                # cheap next to a training step, and a NaN must not reach the model
                if not np.isfinite(a).all():
                    seg = self.segments[indices[k]]
                    raise DataError(
                        f"{self._readers[store].path}: segment {seg.segment_id!r} holds non-finite latents "
                        "(damaged after prepare); rebuild the store with `flowkit prepare`"
                    )
                out[k] = a
        return out  # type: ignore[return-value]

    def fingerprint(self) -> str:
        """sha256 of the store fingerprints, the split, the load options and the accepted segment ids."""
        h = hashlib.sha256()
        head = {"stores": [r.attrs["fingerprint"] for r in self._readers], "split": self.split, **self._options}
        h.update(json.dumps(head, sort_keys=True).encode("utf-8"))
        for s in self.segments:
            h.update(f"\n{s.store}\t{s.segment_id}".encode())
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


__all__ = ["LatentDataset", "LoadReport", "Rejection", "SegmentInfo", "unit_problems"]
