"""The report's evaluations section: each ``flowkit eval`` folder under ``RUN/evals/``.

Reads the ``summary.json`` that ``flowkit eval`` writes (plain JSON, so the report needs
nothing of `flowkit.evaluation`): per eval folder its test list, step, judges and totals
beside the ceilings (the target recordings, raw and through the run's vocoder), and where
its ``eval.md`` lies. A folder without a summary (an eval still running, or killed) is
listed as unfinished. A ``flowkit eval --seeds K`` folder (``seeds.json``) is one row of
means with their 95 % intervals; `seed_comparison_blocks` compares such folders of two
runs on the same test list and says which differences are larger than the noise (a paired
bootstrap of the difference, `flowkit.judges.uncertainty.compare`). A damaged ``seeds.json``
(its ``figures.generated`` not a dict) or a figure in it that is not an interval is left out
with a Note naming the file.
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


def _dict(value: Any) -> dict[str, Any]:
    """``value`` where it is a dict, else {} (a damaged or absent block)."""
    return value if isinstance(value, dict) else {}


def _judge(judges: Any) -> str:
    """The ASR judge's name and model of a ``judges`` block, or "-"."""
    asr = _dict(_dict(judges).get("asr"))
    return " ".join(str(x) for x in (asr.get("name"), asr.get("model")) if x) or "-"


def eval_blocks(run: RunDir) -> list[Any]:
    """A table of the run's evals (one row per kind of clip of each), or [] when it has none."""
    root = Path(run.path) / EVALS_DIR
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if not folders:
        return []
    header = ("eval", "step", "audio", "items", "WER", "CER", "SIM", "DNSMOS", "dur. ratio", "recogniser")
    rows: list[list[str]] = []
    unfinished, damaged = [], []
    for folder in folders:
        seeds = _seeds(folder)
        if seeds is not None:
            rows.append(_seeds_row(folder, seeds))
            damaged += _damaged(folder, seeds)
            continue
        if (folder / SEEDS_FILE).is_file():
            damaged += _damaged(folder, None)
            continue
        try:
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
            totals = summary["totals"]
        except (OSError, ValueError, KeyError, TypeError):
            unfinished.append(folder.name)
            continue
        judge = _judge(summary.get("judges"))
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
    return blocks + [Note(x) for x in damaged]


def _seeds(folder: Path) -> dict[str, Any] | None:
    """The folder's ``seeds.json`` content, or None without one or for one whose ``figures``
    or ``figures.generated`` is not a dict (damaged: `_damaged` says so)."""
    try:
        data = json.loads((folder / SEEDS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(_dict(data.get("figures")).get("generated"), dict)
    return data if ok else None


def _damaged(folder: Path, seeds: dict[str, Any] | None) -> list[str]:
    """A line per part of the folder's ``seeds.json`` left out: the whole file where ``seeds``
    is None (`_seeds`), else each generated figure that is not an interval."""
    from flowkit.judges.uncertainty import Interval

    where = folder / SEEDS_FILE
    if seeds is None:
        return [f"{where}: cannot be read as a flowkit eval --seeds file (JSON with a figures.generated block); "
                "left out"]
    return [f"{where}: figure {name} is not an interval (mean, low, high); left out"
            for name, figure in seeds["figures"]["generated"].items() if Interval.from_json(figure) is None]


def _interval(figure: Any, digits: int = 3) -> str:
    from flowkit.judges.uncertainty import Interval

    interval = Interval.from_json(figure)
    return "-" if interval is None else interval.text(digits)


def _seeds_row(folder: Path, seeds: dict[str, Any]) -> list[str]:
    protocol = _dict(seeds.get("protocol"))
    figures = seeds["figures"]["generated"]
    count = protocol.get("seeds")
    label = f"{len(count)} seeds" if isinstance(count, list) else "seeds"
    return [f"{folder.name} ({label}, 95 % intervals)", str(protocol.get("step", "")),
            "generated", str(protocol.get("items", "")), _interval(figures.get("wer")), _interval(figures.get("cer")),
            _interval(figures.get("sim")), _interval(figures.get("dnsmos"), 2), "", _judge(protocol.get("judges"))]


def seed_comparison_blocks(runs: list[Any]) -> list[Any]:
    """For the first two runs holding ``--seeds`` evals of one test list (same SHA-256): per
    figure both intervals, the difference B - A with its paired 95 % interval, and whether the
    difference is larger than the noise (`flowkit.judges.uncertainty.compare`: the paired
    interval excludes 0, or for a ``seeds.json`` without tables the intervals do not
    overlap; "not computable" where neither is); [] when no two such evals exist. A damaged
    ``seeds.json`` of either run, or a figure in it that is not an interval, adds a Note."""
    from flowkit.judges.uncertainty import compare

    found, damaged = [], []
    for run in runs[:2]:
        root = Path(run.path) / EVALS_DIR
        evals = {}
        for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
            seeds = _seeds(folder)
            if seeds is None and (folder / SEEDS_FILE).is_file():
                damaged += _damaged(folder, None)
            sha = _dict(seeds.get("protocol")).get("testset_sha256") if seeds is not None else None
            if isinstance(sha, str):  # the test list the figures are of; without it, not comparable
                evals.setdefault(sha, (folder, seeds))
        found.append(evals)
    if len(found) < 2:
        return []
    shared = [k for k in found[0] if k in found[1]]
    if not shared:
        return [Note(x) for x in damaged]
    (fa, a), (fb, b) = found[0][shared[0]], found[1][shared[0]]
    pa, pb = _dict(a.get("protocol")), _dict(b.get("protocol"))
    damaged += _damaged(fa, a) + _damaged(fb, b)
    compared = {r["figure"]: r for r in compare(a, b)}
    rows = []
    for name in [n for n in SEED_FIGURES if n in compared] + [n for n in compared if n not in SEED_FIGURES]:
        r = compared[name]
        paired = r["paired"]
        if r["rule"] == "none":
            difference, verdict = "-", "not computable"
        elif paired is None:
            difference = f"{r['difference']:+.3f}"
            verdict = "the intervals do not overlap" if r["differs"] else "the intervals overlap"
        else:
            difference = f"{paired.mean:+.3f} [{paired.low:+.3f}, {paired.high:+.3f}]"
            verdict = f"the difference's interval {'excludes' if r['differs'] else 'holds'} 0"
            if r["shared"] < max(r["a"].utterances, r["b"].utterances):
                verdict += f", on the {r['shared']} utterances both hold"
        rule = verdict if r["rule"] == "none" else f"{r['rule']}: {verdict}"
        rows.append([name.upper(), r["a"].text(), r["b"].text(), difference,
                     f"{'yes' if r['differs'] else 'no'} ({rule})"])
    blocks: list[Any] = [Table(["figure", f"{runs[0].label} ({fa.name})", f"{runs[1].label} ({fb.name})",
                                "difference B - A [paired 95 %]", "larger than the noise?"], rows)]
    differ = [k for k in ("nfe", "cfg", "judges", "model") if pa.get(k) != pb.get(k)]
    if differ:
        blocks.append(Note("Caution: the two evals differ in " + ", ".join(differ) + "; their figures measure "
                           "different protocols."))
    return blocks + [Note(x) for x in damaged]
