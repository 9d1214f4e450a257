"""The report's evaluations section: each ``flowkit eval`` folder under ``RUN/evals/``.

Reads the ``summary.json`` that ``flowkit eval`` writes (plain JSON, so the report needs
nothing of `flowkit.evaluation`): per eval folder its test list, step, judges and totals
beside the ceilings (the target recordings, raw and through the run's vocoder), and where
its ``eval.md`` lies. A folder without a summary (an eval still running, or killed) is
listed as unfinished.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flowkit.report.document import Note, Table
from flowkit.report.rundir import RunDir

__all__ = ["EVALS_DIR", "eval_blocks"]

EVALS_DIR = "evals"


def _f(value: Any, digits: int = 3) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.{digits}f}"


def eval_blocks(run: RunDir) -> list[Any]:
    """A table of the run's evals (one row per kind of clip of each), or [] when it has none."""
    root = Path(run.path) / EVALS_DIR
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if not folders:
        return []
    header = ("eval", "step", "audio", "items", "WER", "CER", "SIM", "DNSMOS", "dur. ratio", "recogniser")
    rows: list[list[str]] = []
    unfinished = []
    for folder in folders:
        try:
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
            totals = summary["totals"]
        except (OSError, ValueError, KeyError, TypeError):
            unfinished.append(folder.name)
            continue
        asr = (summary.get("judges") or {}).get("asr") or {}
        judge = " ".join(x for x in (asr.get("name", ""), asr.get("model", "")) if x) or "-"
        for key, label in (("generated", "generated"), ("truth", "recordings"), ("vocoded", "recordings vocoded")):
            t = totals.get(key)
            if not t:
                continue
            ratio = _f(t.get("duration_ratio"), 2) if key == "generated" else ""
            rows.append([f"{folder.name} ({folder / 'eval.md'})" if key == "generated" else "",
                         str(summary.get("step", "")), label, str(t.get("items", "")), _f(t.get("wer")),
                         _f(t.get("cer")), _f(t.get("sim")), _f(t.get("dnsmos"), 2), ratio,
                         judge if key == "generated" else ""])
    blocks: list[Any] = [Table(header, rows)] if rows else []
    if unfinished:
        blocks.append(Note(f"Unfinished (no summary.json yet; run the same flowkit eval again): {', '.join(unfinished)}"))
    return blocks
