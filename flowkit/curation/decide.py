"""From every clip's measures to the keep/drop list.

Each criterion decides on all clips at once (`flowkit.protocols.CurationCriterion.decide`);
a clip is dropped when any criterion drops it, and every reason is kept. A clip whose
audio does not decode is dropped with the decoder's reason (prepare would reject it too).
The decisions depend only on the measures and the criteria's settings, in the source's
order: the same measures give the same list, however often the measuring was cut short.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.curation.clips import ClipInfo
from flowkit.curation.criteria.base import Decision

__all__ = ["DECISIONS_CSV", "DECISIONS_JSONL", "KEEP", "ClipDecision", "decide", "write_lists"]

DECISIONS_JSONL = "decisions.jsonl"
DECISIONS_CSV = "decisions.csv"
KEEP = "keep.lst"


@attrs.frozen
class ClipDecision:
    """Keep or drop one clip, with every criterion's reason and value."""

    info: ClipInfo
    keep: bool
    reasons: tuple[str, ...]
    values: dict[str, float | None]  # the plotted value of each criterion (None: not judged)
    seconds: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"segment_id": self.info.segment_id, "keep": self.keep, "reasons": list(self.reasons),
                "speaker": self.info.speaker, "language": self.info.language, "text": self.info.text,
                "audio": self.info.audio, "seconds": self.seconds, "values": self.values}


def _finite(v: float) -> float | None:
    import math

    return None if v is None or not math.isfinite(v) else round(float(v), 6)


def decide(infos: Sequence[ClipInfo], records: Mapping[str, Mapping[str, Any]],
           criteria: Mapping[str, Any]) -> tuple[list[ClipDecision], dict[str, Decision]]:
    """Decisions per clip (in the order of ``infos``) and each criterion's `Decision`.

    ``records``: the measures of `flowkit.curation.measure.measure_clips` by segment id;
    a clip without a record is left out (it was never measured).
    """
    measured = [i for i in infos if i.segment_id in records]
    good = [i for i in measured if "error" not in records[i.segment_id]]
    decisions = {name: c.decide(good, [records[i.segment_id]["measures"].get(name, {}) for i in good])
                 for name, c in criteria.items()}
    position = {i.segment_id: k for k, i in enumerate(good)}
    out = []
    for info in measured:
        record = records[info.segment_id]
        if "error" in record:
            err = record["error"]
            out.append(ClipDecision(info, False, (f"audio: {err.get('reason')}: {err.get('detail')}",), {}, None))
            continue
        k = position[info.segment_id]
        reasons = tuple(d.reasons[k] for d in decisions.values() if d.reasons[k])
        values = {name: _finite(d.values[k]) for name, d in decisions.items()}
        out.append(ClipDecision(info, not reasons, reasons, values, record.get("seconds")))
    return out, decisions


def write_lists(out: Path, rows: Sequence[ClipDecision]) -> None:
    """``decisions.jsonl``, ``decisions.csv`` (segment_id, keep, speaker, language, reasons
    joined by "; ") and ``keep.lst`` (kept ids, one a line) in ``out``, each written atomically."""
    from flowkit.io import atomic_write_text

    atomic_write_text(out / DECISIONS_JSONL,
                      "".join(json.dumps(r.to_dict(), ensure_ascii=False, sort_keys=True) + "\n" for r in rows))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["segment_id", "keep", "speaker", "language", "reasons"])
    for r in rows:
        writer.writerow([r.info.segment_id, int(r.keep), r.info.speaker, r.info.language, "; ".join(r.reasons)])
    atomic_write_text(out / DECISIONS_CSV, buf.getvalue())
    atomic_write_text(out / KEEP, "".join(f"{r.info.segment_id}\n" for r in rows if r.keep))
