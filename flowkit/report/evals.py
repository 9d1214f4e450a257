"""The report's evaluations section: each ``flowkit eval`` folder under ``RUN/evals/``.

Reads the ``summary.json`` that ``flowkit eval`` writes (plain JSON, so the report needs
nothing of `flowkit.evaluation`): per eval folder its test list, step, judges and totals
beside the ceilings (the target recordings, raw and through the run's vocoder), and where
its ``eval.md`` lies. A folder without a summary (an eval still running, or killed) is
listed as unfinished. A ``flowkit eval --seeds K`` folder (``seeds.json``) is one row of
means with their 95 % intervals; `seed_comparison_blocks` compares such folders of two
runs on the same test list and says which differences are larger than the noise (a paired
bootstrap of the difference, `flowkit.judges.uncertainty.compare`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flowkit.report.document import Note, Table
from flowkit.report.rundir import RunDir

__all__ = ["EVALS_DIR", "eval_blocks", "seed_comparison_blocks"]

SEEDS_FILE = "seeds.json"  # flowkit.evaluation.seeds.SEEDS_FILE (the report reads plain JSON)
SEED_FIGURES = ("wer", "cer", "sim", "dnsmos")

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
        seeds = _seeds(folder)
        if seeds is not None:
            rows.append(_seeds_row(folder, seeds))
            continue
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
        blocks.append(Note("Unfinished (no summary.json yet; run the same flowkit eval again): "
                           f"{', '.join(unfinished)}"))
    return blocks


def _seeds(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / SEEDS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("figures"), dict) else None


def _interval(figure: dict[str, Any] | None, digits: int = 3) -> str:
    if not isinstance(figure, dict) or not isinstance(figure.get("mean"), (int, float)):
        return "-"
    return f"{figure['mean']:.{digits}f} [{figure['low']:.{digits}f}, {figure['high']:.{digits}f}]"


def _seeds_row(folder: Path, seeds: dict[str, Any]) -> list[str]:
    protocol = seeds.get("protocol", {})
    figures = seeds["figures"].get("generated", {})
    asr = (protocol.get("judges") or {}).get("asr") or {}
    judge = " ".join(x for x in (asr.get("name", ""), asr.get("model", "")) if x) or "-"
    return [f"{folder.name} ({len(protocol.get('seeds', []))} seeds, 95 % intervals)", str(protocol.get("step", "")),
            "generated", str(protocol.get("items", "")), _interval(figures.get("wer")), _interval(figures.get("cer")),
            _interval(figures.get("sim")), _interval(figures.get("dnsmos"), 2), "", judge]


def seed_comparison_blocks(runs: list[Any]) -> list[Any]:
    """For the first two runs holding ``--seeds`` evals of one test list (same SHA-256): per
    figure both intervals, the difference B - A with its paired 95 % interval, and whether the
    difference is larger than the noise (`flowkit.judges.uncertainty.compare`: the paired
    interval excludes 0, or for a ``seeds.json`` without tables the intervals do not
    overlap); [] when no two such evals exist."""
    from flowkit.judges.uncertainty import compare

    found = []
    for run in runs[:2]:
        root = Path(run.path) / EVALS_DIR
        evals = {}
        for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
            seeds = _seeds(folder)
            if seeds is not None:
                evals.setdefault(seeds.get("protocol", {}).get("testset_sha256"), (folder, seeds))
        found.append(evals)
    if len(found) < 2:
        return []
    shared = [k for k in found[0] if k is not None and k in found[1]]
    if not shared:
        return []
    (fa, a), (fb, b) = found[0][shared[0]], found[1][shared[0]]
    pa, pb = a.get("protocol", {}), b.get("protocol", {})
    compared = {r["figure"]: r for r in compare(a, b)}
    rows = []
    for name in [n for n in SEED_FIGURES if n in compared] + [n for n in compared if n not in SEED_FIGURES]:
        r = compared[name]
        paired = r["paired"]
        if paired is None:
            difference = f"{r['difference']:+.3f}"
            verdict = "the intervals do not overlap" if r["differs"] else "the intervals overlap"
        else:
            difference = f"{paired.mean:+.3f} [{paired.low:+.3f}, {paired.high:+.3f}]"
            verdict = f"the difference's interval {'excludes' if r['differs'] else 'holds'} 0"
            if r["shared"] < max(r["a"].utterances, r["b"].utterances):
                verdict += f", on the {r['shared']} utterances both hold"
        rows.append([name.upper(), r["a"].text(), r["b"].text(), difference,
                     f"{'yes' if r['differs'] else 'no'} ({r['rule']}: {verdict})"])
    blocks: list[Any] = [Table(["figure", f"{runs[0].label} ({fa.name})", f"{runs[1].label} ({fb.name})",
                                "difference B - A [paired 95 %]", "larger than the noise?"], rows)]
    differ = [k for k in ("nfe", "cfg", "judges", "model") if pa.get(k) != pb.get(k)]
    if differ:
        blocks.append(Note("Caution: the two evals differ in " + ", ".join(differ) + "; their figures measure "
                           "different protocols."))
    return blocks
