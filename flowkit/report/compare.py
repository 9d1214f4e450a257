"""Comparing runs: which config bindings differ between them, which run is best, sweeps.

Each run is compared with the first through `flowkit.config.config_diff` on their
``config.gin`` texts; a binding that differs anywhere gets one row with every run's value
(``-`` where a run does not bind it).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.config import config_diff
from flowkit.errors import DataError
from flowkit.report.document import Facts, Figure, Note, Section, Table
from flowkit.report.plots import Curve, curves_png
from flowkit.report.rundir import RunDir

__all__ = [
    "DETAIL_RUNS", "OBJECTIVES", "SweepInfo", "comparison_sections", "config_differences", "expand_sweeps",
    "objective_value", "readable_value", "run_labels", "short_keys", "wall_seconds",
]


def config_differences(texts: Sequence[str]) -> list[tuple[str, list[str]]]:
    """``[(binding, [value in run 0, value in run 1, ...])]`` for bindings that differ, by name.

    Args:
        texts: the runs' ``config.gin`` texts, in the order of the report's columns.
    """
    if len(texts) < 2:
        return []
    diffs = [config_diff(texts[0], other) for other in texts[1:]]
    changed = [{**d.allowed, **d.refused} for d in diffs]
    keys = sorted({k for c in changed for k in c})
    rows = []
    for key in keys:
        first = next((c[key][0] for c in changed if key in c), None)
        values = [first] + [c[key][1] if key in c else first for c in changed]
        rows.append((key, ["-" if v is None else v for v in values]))
    return rows


def short_keys(keys: Sequence[str]) -> dict[str, str]:
    """The shortest unambiguous name of each binding key: ``Trainer.lr`` -> ``lr``.

    A key is cut to its last ``.``/``/``-separated parts, as few as keep it distinct from
    every other key given (``Trainer.lr`` and ``Probe.lr`` stay whole). Used for sweep
    point names and for the columns and legends of a comparison.
    """
    parts = {k: [p for p in re.split(r"[./]", k) if p] for k in keys}
    out: dict[str, str] = {}
    for key, mine in parts.items():
        for n in range(1, len(mine) + 1):
            tail = mine[-n:]
            if all(other[-n:] != tail for k2, other in parts.items() if k2 != key):
                out[key] = ".".join(tail)
                break
        else:
            out[key] = key
    return out


#: What a sweep or a comparison can rank runs by (each: lower is better).
OBJECTIVES = {
    "val_loss_ema": ("eval", "val_loss_ema", "best EMA validation loss"),
    "probe_wer": ("probe", "probe_wer", "best probe WER"),
}


def objective_value(run: RunDir, objective: str) -> float | None:
    """The run's best (lowest) value of ``objective`` (a key of `OBJECTIVES`); None when it
    logged none (no validation data, no probe)."""
    kind, key, _ = OBJECTIVES[objective]
    _, values = run.series(kind, key)
    finite = [v for v in values if math.isfinite(v)]
    return min(finite) if finite else None


_REFERENCE = re.compile(r"^@(?:\w+/)*(?:\w+\.)*(?P<name>\w+)(?:\(\))?$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def readable_value(text: str) -> str:
    """A gin value as a short plain word: ``@schedule.cosine_vpred()`` -> ``cosine_vpred``,
    ``'abc'`` -> ``abc``, ``%LR`` -> ``LR``, ``[1, 2]`` -> ``1_2``; never empty. Only
    ``[A-Za-z0-9._+-]`` remain (a directory name and a legend entry)."""
    value = text.strip()
    m = _REFERENCE.match(value)
    if m:
        value = m.group("name")
    elif len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    elif value.startswith("%"):
        value = value[1:]
    value = _UNSAFE.sub("_", value).strip("_.")
    return value or "_"


# ---- sweep directories ------------------------------------------------------------------

#: The file `flowkit sweep` writes in a sweep directory (read here as plain JSON: the report
#: sits below the sweep package).
SWEEP_FILE = "sweep.json"


@attrs.frozen
class SweepInfo:
    """What a report takes from a sweep's ``sweep.json``."""

    path: Path
    objective: str | None
    wall_s: dict[str, float]  # run directory -> seconds its attempts took
    missing: tuple[str, ...] = ()  # points sweep.json says were started whose run directory is gone


def expand_sweeps(paths: Sequence[Path]) -> tuple[list[Path], SweepInfo | None]:
    """Run directories of ``paths``: a sweep directory (holding ``sweep.json``) stands for its
    points that have a run directory, in the sweep's order; a run directory for itself.

    Returns the run directories and the (first) sweep's info, None when no sweep is given.

    Raises:
        DataError: a ``sweep.json`` that cannot be read, or a sweep with no run yet.
    """
    out: list[Path] = []
    info: SweepInfo | None = None
    for path in paths:
        file = Path(path) / SWEEP_FILE
        if not file.is_file():
            out.append(Path(path))
            continue
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
            points = [p for p in doc["points"] if isinstance(p, dict) and p.get("name")]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{file}: cannot be read as a sweep file ({type(exc).__name__}); "
                            "it is written by flowkit sweep") from None
        runs = [Path(path) / str(p.get("dir") or p["name"]) for p in points]
        # a point that was started (attempts > 0) and has no run directory was deleted or moved
        gone = tuple(str(p["name"]) for p, r in zip(points, runs, strict=True)
                     if not r.is_dir() and (p.get("attempts") or p.get("state") not in (None, "pending")))
        runs = [r for r in runs if r.is_dir()]
        if not runs:
            raise DataError(f"{path} is a sweep with no run directory yet; run its flowkit sweep command first")
        out += runs
        if info is None:
            spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
            info = SweepInfo(Path(path), spec.get("objective"), {}, gone)
        for p in points:
            if isinstance(p.get("wall_s"), (int, float)) and p["wall_s"] > 0:
                info.wall_s[str(Path(path) / str(p.get("dir") or p["name"]))] = float(p["wall_s"])
    return out, info


# ---- the comparison of N runs ---------------------------------------------------------

#: Up to this many runs a comparison also shows each run's own sections and the config
#: differences as a table of its own; beyond, the differing bindings are columns of the
#: runs table and each run keeps its own report (``flowkit report RUN``).
DETAIL_RUNS = 4
_LOSS_TARGETS = ("schedule", "t_sampler", "loss")


def _show(value: Any, digits: int = 5) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if math.isfinite(value) else str(value)
    return str(value)


def _wall(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def wall_seconds(run: RunDir, sweep: SweepInfo | None = None) -> float | None:
    """Seconds a run took: the sweep's record of its attempts when it is a sweep point;
    else from its first file (``run_info.json``) to its last heartbeat (pauses between a
    stop and a resume included)."""
    if sweep is not None and str(run.path) in sweep.wall_s:
        return sweep.wall_s[str(run.path)]
    end = run.heartbeat.get("time")
    info = run.path / "run_info.json"
    if not isinstance(end, (int, float)) or not info.is_file():
        return None
    return max(0.0, float(end) - info.stat().st_mtime)


def _latest(run: RunDir, kind: str, key: str) -> float | None:
    _, values = run.series(kind, key)
    return values[-1] if values else None


def _extreme(run: RunDir, kind: str, key: str, best: Any) -> float | None:
    """The best logged value of ``key``; step 0 (the untrained model's baseline) counts only
    when nothing was logged after it."""
    steps, values = run.series(kind, key)
    pairs = [(s, v) for s, v in zip(steps, values, strict=True) if math.isfinite(v)]
    trained = [v for s, v in pairs if s > 0]
    finite = trained or [v for _, v in pairs]
    return best(finite) if finite else None


def run_labels(runs: Sequence[RunDir], diff: Sequence[tuple[str, list[str]]]) -> list[str]:
    """The legend of overlaid curves: each run's directory name (a sweep point's name is
    already its bindings). Where two runs share a name (``a/run``, ``b/run``), the runs are
    named by their differing bindings (``lr=0.002, schedule=cosine_vpred``) when those fit
    in 60 characters, else by parent and name."""
    names = [run.label for run in runs]
    if len(set(names)) == len(names):
        return names
    shorts = short_keys([k for k, _ in diff])
    labels = []
    for i, run in enumerate(runs):
        label = ", ".join(f"{shorts[k]}={readable_value(values[i])}" for k, values in diff)
        labels.append(label if label and len(label) <= 60 else f"{run.path.parent.name}/{run.label}")
    return labels


def _figures(runs: Sequence[RunDir], labels: Sequence[str], best: int | None) -> list[Figure]:
    figures: list[Figure] = []
    few = len(runs) <= 2

    def plot(name: str, title: str, ylabel: str, kind: str, keys: Sequence[str], log_y: bool) -> None:
        curves = []
        for i, (run, label) in enumerate(zip(runs, labels, strict=True)):
            for key in keys:
                if key not in run.metric_keys(kind):
                    continue
                tag = label if len(keys) == 1 or key == keys[0] else f"{label}: {key}"
                curves.append(Curve(tag, *run.series(kind, key), dashed=key != keys[0], highlight=i == best))
        if any(c.steps for c in curves):
            figures.append(Figure(title, curves_png(title, ylabel, curves, log_y=log_y), f"compare-{name}.png"))

    plot("loss", "training loss", "loss", "train", ["loss"], True)
    plot("val_loss", "validation loss (EMA" + ("; raw weights dashed)" if few else ")"), "loss", "eval",
         ["val_loss_ema", "val_loss"] if few else ["val_loss_ema"], True)
    plot("text_gain", "text gain (EMA loss without text minus with)", "loss difference", "eval", ["text_gain"], False)
    plot("probe_wer", "probe WER", "WER", "probe", ["probe_wer"], False)
    plot("probe_sim", "probe speaker similarity", "cosine", "probe", ["probe_sim"], False)
    if len(runs) <= DETAIL_RUNS:  # beyond, the table's frames/s column says it (and a big legend costs seconds)
        plot("lr", "learning rate", "lr", "train", ["lr"], False)
        plot("frames_per_s", "throughput", "frames/s", "train", ["frames_per_s"], False)
    return figures


def comparison_sections(runs: Sequence[RunDir], *, sweep: SweepInfo | None = None,
                        objective: str | None = None) -> list[Section]:
    """Sections comparing runs: one sortable table (each run's differing bindings and final
    figures), the best run by ``objective``, overlaid curves with a legend of the
    differing bindings, and (up to `DETAIL_RUNS` runs) the config differences.

    ``objective``: a key of `OBJECTIVES`; default the sweep's, else ``val_loss_ema``.
    """
    objective = objective or (sweep.objective if sweep is not None else None) or "val_loss_ema"
    diff = config_differences([r.config_text for r in runs])
    shorts = short_keys([k for k, _ in diff])
    labels = run_labels(runs, diff)
    scores = [objective_value(r, objective) for r in runs]
    scored = [i for i, s in enumerate(scores) if s is not None]
    best = min(scored, key=lambda i: scores[i]) if scored else None  # type: ignore[arg-type,return-value]
    has_wer = any("probe_wer" in r.metric_keys("probe") for r in runs)
    has_sim = any("probe_sim" in r.metric_keys("probe") for r in runs)
    fixed = {"run", "state", "steps", "last loss", "best EMA val loss", "text gain", "frames/s", "wall time", "device"}
    # a binding whose short name is a fixed column's title (Trainer.steps) keeps its whole key
    columns = [shorts[k] if shorts[k] not in fixed else k for k, _ in diff]
    header = ["run", "state", "steps", *columns, "last loss", "best EMA val loss", "text gain"]
    header += ["best probe WER"] * has_wer + ["best probe SIM"] * has_sim + ["frames/s", "wall time", "device"]
    rows = []
    for i, r in enumerate(runs):
        fps = _mean_throughput(r)
        row = [r.label, r.state, f"{r.step} / {_show(r.total_steps)}", *(_cell(values[i]) for _, values in diff),
               _show(_latest(r, "train", "loss")), _show(objective_value(r, "val_loss_ema")),
               _show(_latest(r, "eval", "text_gain"), 3)]
        row += [_show(_extreme(r, "probe", "probe_wer", min), 3)] * has_wer
        row += [_show(_extreme(r, "probe", "probe_sim", max), 3)] * has_sim
        row += [f"{fps:,.0f}" if fps else "-", _wall(wall_seconds(r, sweep)), _show(r.info("device"))]
        rows.append(row)
    _, _, what = OBJECTIVES[objective]
    if best is not None:
        verdict = Note(f"Best by {objective} ({what}, lower is better): {runs[best].label} = {scores[best]:.5g}"
                       + (f" ({labels[best]})" if labels[best] != runs[best].label else "") + ".")
    else:
        verdict = Note(f"No run has logged {objective} yet ({what}): no best run to name.")
    incomparable = sorted(k for k, _ in diff if k.split(".")[0] in _LOSS_TARGETS
                          or k in ("Trainer.schedule", "Trainer.t_sampler", "Trainer.losses"))
    caution = [Note(
        "Caution: the runs differ in " + ", ".join(incomparable) + ". Their losses measure different "
        "targets (or average over different flow times), so compare them by listening "
        "(--samples), not by the loss values."
    )] if incomparable else []
    where = Facts([(r.label, str(r.path)) for r in runs]) if len(runs) <= DETAIL_RUNS else Note(
        f"{len(runs)} runs" + (f" of the sweep {sweep.path}" if sweep is not None else "")
        + "; click a column title to sort by it. Each run's own report: flowkit report RUN_DIR.")
    missing = [Note(
        f"Missing: {len(sweep.missing)} point(s) of the sweep were started but their run directory is gone "
        f"({', '.join(sweep.missing[:5])}{', ...' if len(sweep.missing) > 5 else ''}); they are not compared, and the "
        "best run is named among the others. Run the sweep's command again to train them anew."
    )] if sweep is not None and sweep.missing else []
    sections = [Section("Runs", [verdict, *missing, Table(header, rows, sortable=True), *caution, where])]
    if len(runs) <= DETAIL_RUNS:
        block: Any = (Table(["binding", *(r.label for r in runs)], [[k, *v] for k, v in diff]) if diff
                      else Note("The runs' config.gin bindings are identical."))
        sections.append(Section("Config differences", [block]))
    from flowkit.report.evals import seed_comparison_blocks

    evals = seed_comparison_blocks(list(runs))
    if evals:
        sections.append(Section("Evaluations with intervals (flowkit eval --seeds)", evals))
    figures = _figures(runs, labels, best)
    sections.append(Section("Curves (overlaid)", figures or [Note("No metrics recorded yet.")]))
    return sections


def _cell(value: str) -> str:
    """A binding's value in the runs table: a reference by its component's name (the exact
    gin text is in the config differences and each run's config.gin)."""
    return readable_value(value) if value.startswith("@") else value


def _mean_throughput(run: RunDir) -> float | None:
    """Mean frames/s over the logged train records (None without any)."""
    _, values = run.series("train", "frames_per_s")
    return sum(values) / len(values) if values else None
