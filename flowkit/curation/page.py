"""The curation's report page, ``DIR/curation.html`` (one self-contained file, as the run
report: `flowkit.report.render_html`).

Sections: the counts (kept, dropped per criterion), one figure per criterion with the
distribution of its value per group (speaker and language) and the group's thresholds
drawn as red lines, the thresholds as a table, and players of dropped clips (the first
``examples`` of each criterion, the clip as the judges heard it: mono, 16 kHz).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowkit.curation.criteria.base import Decision
from flowkit.curation.decide import ClipDecision

__all__ = ["PAGE", "distribution_png", "write_page"]

PAGE = "curation.html"
#: groups drawn in one figure; more are drawn as one pooled histogram with every threshold
MAX_PANELS = 24


def distribution_png(decision: Decision, groups: Sequence[str]) -> bytes:
    """Histograms of ``decision.values`` per group (``groups``: each clip's), the group's
    bounds as red lines, dropped clips stacked in orange (PNG bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = np.asarray(decision.values, dtype=np.float64)
    dropped = np.asarray([r is not None for r in decision.reasons])
    names = sorted(set(groups)) if len(set(groups)) <= MAX_PANELS else ["all"]
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.6 * rows), squeeze=False)
    finite = values[np.isfinite(values)]
    edges = np.histogram_bin_edges(finite, bins=30) if finite.size else np.linspace(0, 1, 31)
    by_group = {t.group: t for t in decision.thresholds}
    for ax, name in zip(axes.flat, names, strict=False):
        mine = np.asarray([name in ("all", g) for g in groups])
        ok = mine & np.isfinite(values)
        ax.hist([values[ok & ~dropped], values[ok & dropped]], bins=edges, stacked=True,
                color=["#4878a8", "#e08030"], label=["kept", "dropped"])
        shown = decision.thresholds if name == "all" else [by_group[name]] if name in by_group else []
        for t in shown:
            for bound in (t.low, t.high):
                if bound is not None and math.isfinite(bound):
                    ax.axvline(bound, color="#c00000", linewidth=1.2)
        ax.set_title(f"{name} ({int(ok.sum())} clips)", fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{decision.criterion}: {decision.label}", fontsize=10)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=70)
    plt.close(fig)
    return buffer.getvalue()


def _wav(row: ClipDecision) -> bytes | None:
    from flowkit.curation.clips import CURATION_RATE
    from flowkit.data.audio import AudioError
    from flowkit.data.importers.sources import load_item_audio
    from flowkit.synth.wav import wav_bytes

    audio_path = Path(row.info.audio)
    if not audio_path.is_file():  # audio inside a dataset file: no player
        return None
    try:
        audio = load_item_audio(audio_path, CURATION_RATE)
    except AudioError:
        return None
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    return wav_bytes(audio / peak if peak > 1.0 else audio, CURATION_RATE)


def write_page(out: Path, rows: Sequence[ClipDecision], decisions: Mapping[str, Decision],
               criteria: Mapping[str, Any], *, examples: int) -> Path:
    """Write ``out/curation.html``; returns its path."""
    from flowkit.io import atomic_write_text
    from flowkit.report.document import (
        Audio,
        Document,
        Facts,
        Figure,
        Note,
        SampleBlock,
        Section,
        Table,
    )
    from flowkit.report.render_html import render_html

    judged = [r for r in rows if r.values]
    kept = sum(r.keep for r in rows)
    facts = [("clips", str(len(rows))), ("kept", str(kept)), ("dropped", str(len(rows) - kept))]
    facts += [(f"dropped by {name}", str(sum(x is not None for x in d.reasons))) for name, d in decisions.items()]
    facts.append(("audio", f"{sum(r.seconds or 0.0 for r in rows) / 60:.1f} min"))
    counts: list[Any] = [Facts(facts)]
    counts += [Note(n) for d in decisions.values() for n in d.notes]
    sections = [Section("Counts", counts)]
    figures: list[Any] = []
    for name, d in decisions.items():
        groups = [r.info.speaker if name == "speaker_centroid" else r.info.group for r in judged]
        figures.append(Figure(f"{name}", distribution_png(d, groups), f"{name}.png"))
    sections.append(Section("Distributions (red: the thresholds; orange: dropped)", figures))
    header = ["criterion", "group", "clips", "median", "low", "high"]

    def fmt(v: float | None) -> str:
        return "-" if v is None or not math.isfinite(v) else f"{v:.3g}"

    table = [[name, t.group, str(t.clips), fmt(t.median), fmt(t.low), fmt(t.high)]
             for name, d in decisions.items() for t in d.thresholds]
    settings = [(name, ", ".join(f"{k} {v}" for k, v in c.describe().items() if k != "name"))
                for name, c in criteria.items()]
    sections.append(Section("Thresholds", [Table(header, table, sortable=True), Facts(settings)]))
    samples: list[Any] = []
    shown: set[str] = set()
    for name, d in decisions.items():
        picked = 0
        for r, reason in zip(judged, d.reasons, strict=True):
            if reason is None or picked >= examples or r.info.segment_id in shown:
                continue
            wav = _wav(r)
            audios = [] if wav is None else [("clip", Audio(wav, f"{r.info.segment_id}.wav"))]
            samples.append(SampleBlock(f"{name}: {r.info.segment_id}",
                                       f"{r.info.group}; text: {r.info.text!r}; " + "; ".join(r.reasons), [], audios))
            shown.add(r.info.segment_id)
            picked += 1
    sections.append(Section("Dropped clips, by criterion", samples or [Note("No clip was dropped.")]))
    dropped = [[r.info.segment_id, r.info.group, "; ".join(r.reasons)] for r in rows if not r.keep]
    sections.append(Section("Every dropped clip", [Table(["segment", "group", "reasons"], dropped, sortable=True)]
                            if dropped else [Note("No clip was dropped.")]))
    path = out / PAGE
    atomic_write_text(path, render_html(Document(f"flowkit curate: {out.name}", sections)))
    return path
