"""What a report says about runs: facts, tables and plots, as `flowkit.report.document` blocks.

Every value is read from the run directory (`flowkit.report.rundir.RunDir`); anything a run
has not written yet shows as ``-`` instead of failing, so a report works on a run in
progress, an interrupted one, or one without validation data.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

from flowkit.report import compare
from flowkit.report.document import Code, Facts, Figure, Note, Section, Table
from flowkit.report.evals import eval_blocks
from flowkit.report.intelligibility import intelligibility_blocks
from flowkit.report.plots import Curve, curves_png
from flowkit.report.rundir import RunDir

__all__ = ["CONFIG_TITLE", "comparison_sections", "run_sections", "throughput"]

#: the title of a run's config section: `flowkit.report.build` moves these below the samples
CONFIG_TITLE = "Operative config (config.gin)"
# Eval passes drawn on the EMA validation plot (raw weights are drawn dashed for contrast).
_EMA_PREFIX = "val_loss_ema"


def _show(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.5g}" if math.isfinite(value) else str(value)
    return str(value)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def throughput(run: RunDir) -> float | None:
    """Mean frames/s over the logged train records (None without any)."""
    _, values = run.series("train", "frames_per_s")
    return sum(values) / len(values) if values else None


def _best_val_loss(run: RunDir) -> Any:
    """The newest ``best_val_loss`` any record carries (None before the first evaluation)."""
    return next((r["best_val_loss"] for r in reversed(run.records) if r.get("best_val_loss") is not None), None)


def _state_line(run: RunDir) -> str:
    state = run.state
    if state == "interrupted":
        return f"interrupted (checkpoint saved; continue with `flowkit resume {run.path}`)"
    if state == "stopped early":
        return ("stopped early (no stop request recorded; continue from the last checkpoint with "
                f"`flowkit resume {run.path}`)")
    if state == "in progress":
        return f"in progress (heartbeat {_age(run.heartbeat_age_s)})"
    return state


def _model_line(run: RunDir) -> str:
    config = run.info("model_config") or {}
    params = run.info("num_parameters", "num_params")
    if not isinstance(config, Mapping) or not config:
        return f"- ({_params(params)})" if params else "-"
    shape = ", ".join(f"{k}={config[k]}" for k in ("dim", "depth", "heads") if k in config)
    path = config.get("text_path", "?")
    extra = f", dur_cond={config['dur_cond']}" if config.get("dur_cond", "none") != "none" else ""
    return f"dit preset {config.get('preset', '?')} ({shape}; text path {path}{extra}), {_params(params)}"


def _params(n: Any) -> str:
    if not isinstance(n, int):
        return "parameters unknown"
    return f"{n / 1e6:.2f}M parameters" if n >= 1e5 else f"{n:,} parameters"


def _facts(run: RunDir) -> Facts:
    total = run.total_steps
    best = run.best_checkpoint
    best_loss = _best_val_loss(run)
    fps = throughput(run)
    items = [
        ("state", _state_line(run)),
        ("steps", f"{run.step} / {_show(total)}"),
        ("model", _model_line(run)),
        ("device", _show(run.info("device"))),
        ("seed", _show(run.info("seed"))),
        ("git commit", _show(run.info("git_commit"))),
        ("data fingerprint", _show(run.info("data_fingerprint"))),
        ("stores", ", ".join(map(str, run.info("stores") or [])) or "-"),
        ("throughput", f"{fps:,.0f} frames/s (mean of logged steps)" if fps else "-"),
        ("best EMA validation loss", f"{_show(best_loss)}" + (f" (best/{best.path.name})" if best else "")),
    ]
    if run.info("init_from"):
        init = run.info("init_from")
        items.append(("init from", (f"{init.get('checkpoint')} (step {init.get('step')})"
                                    if isinstance(init, Mapping) else str(init))))
    if run.torn_lines:
        why = ("damaged lines inside the file: the figures above lack what they held" if run.torn_inside
               else "the last line, torn: a line being written, or a writer stopped mid-line")
        items.append(("metrics.jsonl", f"{run.torn_lines} unreadable line(s) skipped ({why})"))
    if run.damaged:
        items.append(("damaged files",
                      f"{', '.join(run.damaged)} cannot be read as JSON; what they record is shown as '-'"))
    return Facts(items)


def _resume_table(run: RunDir) -> Table | Note:
    if not run.resumes:
        return Note("Never resumed.")
    rows = []
    for step, info in run.resumes:
        changes = info.get("allowed_config_changes") or {}
        changed = "; ".join(f"{k}: {v[0]} -> {v[1]}" for k, v in changes.items()
                            if isinstance(v, (list, tuple)) and len(v) == 2)
        skipped = len(info.get("skipped_checkpoints") or [])
        rows.append([str(step), _show(info.get("resumed_from")), _show(info.get("device")), changed or "-",
                     str(skipped)])
    return Table(["at step", "from checkpoint", "device", "config changes", "skipped corrupt"], rows)


def _data_blocks(run: RunDir) -> list[Any]:
    reports = run.run_info.get("load_reports") or {}
    rejected = run.rejection_counts()
    rows = []
    for split in sorted(set(reports) | set(rejected)):
        rep = reports.get(split) or {}
        by_reason = rep.get("rejected_by_reason") or rejected.get(split) or {}
        n_rejected = rep.get("rejected", sum(by_reason.values()))
        reasons = ", ".join(f"{k}: {v}" for k, v in by_reason.items()) or "-"
        rows.append([split, _show(rep.get("considered")), _show(rep.get("accepted")), _show(n_rejected), reasons])
    blocks: list[Any] = []
    if rows:
        blocks.append(Table(["split", "considered", "accepted", "rejected", "rejected by reason"], rows))
    else:
        blocks.append(Note("No load report in run_info.json and no data_rejections.jsonl."))
    val = reports.get("val") or {}
    if reports and not val.get("accepted"):
        blocks.append(Note("No validation data: no evaluation passes, no best checkpoint; "
                           "samples come from the newest checkpoint."))
    pairing = run.newest_meta().get("pairing_totals")
    if isinstance(pairing, Mapping) and pairing:
        items, given = pairing.get("items", 0), pairing.get("given", 0)
        fallbacks = pairing.get("fallbacks") or {}
        why = ", ".join(f"{reason}: {count}" for reason, count in fallbacks.items()) or "none"
        blocks.append(Facts([
            ("training items drawn", _show(items)),
            ("prompts from another segment of the speaker (cross-segment)", _show(given)),
            ("cross-segment fallbacks to the in-clip prompt, by reason", why),
        ]))
    return blocks


def _checkpoint_table(run: RunDir) -> Table | Note:
    entries = [("checkpoints", c) for c in run.checkpoints] + [("best", c) for c in run.best]
    if not entries:
        return Note("No checkpoint written yet.")
    rows = []
    for where, c in sorted(entries, key=lambda e: (e[1].step, e[0])):
        counters = c.meta.get("counters") or {}
        rows.append([
            f"{where}/{c.path.name}",
            str(c.step),
            "yes" if c.complete else "NO (interrupted save)",
            _show(counters.get("best_val_loss")),
            f"{c.bytes / 1e6:.1f} MB",
        ])
    return Table(["checkpoint", "step", "complete", "best EMA val loss then", "size"], rows)


def _eval_table(run: RunDir) -> Table | Note:
    evals = run.eval_records()
    if not evals:
        return Note("No evaluation records (no validation data, or no evaluation yet).")
    keys = [k for k in run.metric_keys("eval") if k.startswith("val_") and "/" not in k]
    rows = [[str(e["step"]), *(_show(e.get(k)) for k in keys)] for e in evals]
    return Table(["step", *keys], rows)


def _run_plots(runs: Sequence[RunDir], prefix: str) -> list[Figure]:
    """The standard plots; with several runs each plot overlays every run."""
    figures: list[Figure] = []

    def maybe_plot(name: str, title: str, ylabel: str, curves: list[Curve], log_y: bool) -> None:
        if any(c.steps for c in curves):
            figures.append(Figure(title, curves_png(title, ylabel, curves, log_y=log_y), f"{prefix}{name}.png"))

    def train_plot(key: str, title: str, ylabel: str, log_y: bool) -> None:
        maybe_plot(key, title, ylabel, [Curve(r.label, *r.series("train", key)) for r in runs], log_y)

    # Loss first, validation next to it, then the diagnostics.
    train_plot("loss", "training loss", "loss", True)
    eval_curves = [
        Curve(f"{r.label}: {key}" if len(runs) > 1 else key, *r.series("eval", key),
              dashed=not key.startswith(_EMA_PREFIX))
        for r in runs
        for key in r.metric_keys("eval")
        if key.startswith("val_loss") and "/" not in key  # totals only, not per-term "/name"
    ]
    maybe_plot("val_loss", "validation loss (EMA passes; raw weights dashed)", "loss", eval_curves, True)
    train_plot("lr", "learning rate", "lr", False)
    train_plot("grad_norm", "gradient norm (before clipping)", "L2 norm", True)
    train_plot("frames_per_s", "throughput", "frames/s", False)
    return figures


def run_sections(run: RunDir, *, prefix: str = "", title_prefix: str = "") -> list[Section]:
    """The sections of one run: summary, resumes, data, evaluation, checkpoints, plots, config."""
    t = title_prefix
    sections = [
        Section(f"{t}Summary", [_facts(run)]),
        Section(f"{t}Resume history", [_resume_table(run)]),
        Section(f"{t}Data", _data_blocks(run)),
        Section(f"{t}Validation", [_eval_table(run)]),
        Section(f"{t}Checkpoints", [_checkpoint_table(run)]),
    ]
    figures = _run_plots([run], prefix)
    sections.append(Section(f"{t}Curves", figures or [Note("No metrics recorded yet.")]))
    heard = intelligibility_blocks(run, prefix)
    if heard:
        sections.append(Section(f"{t}Intelligibility (probe WER, text gain)", heard))
    evals = eval_blocks(run)
    if evals:  # flowkit eval folders under RUN/evals/
        sections.append(Section(f"{t}Evaluations", evals))
    config = run.config_text.strip()
    sections.append(Section(f"{t}{CONFIG_TITLE}", [Code(config, "gin") if config else Note("No config.gin.")]))
    return sections


def comparison_sections(runs: Sequence[RunDir], *, sweep: Any = None, objective: str | None = None) -> list[Section]:
    """Sections comparing several runs (`flowkit.report.compare.comparison_sections`)."""
    return compare.comparison_sections(runs, sweep=sweep, objective=objective)


def generated_note() -> str:
    return f"Generated by flowkit report at {dt.datetime.now().strftime('%Y-%m-%d %H:%M:%S')}."
