"""`write_report`: read runs, assemble the document, write report.md, its files and report.html.

Output folder: the run (or sweep) directory for one, ``./report-<timestamp>`` for several, or
``out``. ``report.md`` links PNG and WAV files in ``report_files/``; ``report.html`` embeds
the same files as data URIs and opens offline on its own.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import ConfigError
from flowkit.io import atomic_write_bytes, atomic_write_text, missing_dirs
from flowkit.report.compare import DETAIL_RUNS, OBJECTIVES, expand_sweeps
from flowkit.report.document import Document, Note, Section
from flowkit.report.render_html import render_html
from flowkit.report.render_md import render_markdown
from flowkit.report.rundir import read_run
from flowkit.report.summary import CONFIG_TITLE, comparison_sections, generated_note, run_sections

__all__ = ["ReportFiles", "build_document", "write_report"]

FILES_DIR = "report_files"


@attrs.frozen
class ReportFiles:
    """Where a report was written."""

    markdown: Path
    html: Path
    files: tuple[Path, ...]


def build_document(run_dirs: Sequence[Path], *, samples: int = 0, vocoder: Any = None,
                   objective: str | None = None) -> Document:
    """The report document of ``run_dirs`` (one run, or a comparison of several).

    A sweep directory (``flowkit sweep --out``) stands for its points' runs.
    ``vocoder`` decodes the samples (None: each run's ``Trainer.vocoder``, else Griffin-Lim).
    ``objective`` names the best run of a comparison (`flowkit.report.compare.OBJECTIVES`;
    default: the sweep's, else val_loss_ema).

    Raises:
        NotARunError: a path that is not a run directory (checked before any work).
        ConfigError: a vocoder that cannot invert a run's latents (see `sample_blocks`);
            an unknown objective.
    """
    if objective is not None and objective not in OBJECTIVES:
        raise ConfigError(f"--objective {objective!r} is not known; use one of: {', '.join(OBJECTIVES)}")
    paths, sweep = expand_sweeps([Path(p) for p in run_dirs])
    runs = [read_run(p) for p in paths]
    if len(runs) == 1 and sweep is None:
        run = runs[0]
        sections = run_sections(run)
        title = f"Run report: {run.label}"
    else:
        sections = comparison_sections(runs, sweep=sweep, objective=objective)
        if len(runs) <= DETAIL_RUNS:
            for k, run in enumerate(runs):
                sections += run_sections(run, prefix=f"run{k + 1}-", title_prefix=f"{run.label}: ")
        title = f"Comparison of {len(runs)} runs"
        title += f" of the sweep {sweep.path.name}" if sweep is not None else ""
        if len(runs) <= DETAIL_RUNS and sweep is None:  # a sweep's point names are its table's first column
            title += ": " + ", ".join(r.label for r in runs)
    if samples > 0:
        from flowkit.report.samples import sample_blocks

        for k, run in enumerate(runs):
            prefix = f"run{k + 1}-" if len(runs) > 1 else ""
            label = "Samples" if len(runs) == 1 else f"{run.label}: Samples"
            sections.append(Section(label, sample_blocks(run.path, samples, prefix=prefix, vocoder=vocoder)))
    # A config dump is long: the samples and figures come first, the configs last.
    sections = [x for x in sections if not x.title.endswith(CONFIG_TITLE)] + [
        x for x in sections if x.title.endswith(CONFIG_TITLE)]
    sections.append(Section("About this report", [Note(generated_note())]))
    return Document(title, sections)


def default_out(run_dirs: Sequence[Path]) -> Path:
    """The run (or sweep) directory itself for one; a new ``report-<timestamp>`` for several,
    or for a run read from the Hugging Face Hub (its folder is the hub's cache)."""
    from flowkit import hub

    if len(run_dirs) == 1 and not hub.is_hub(run_dirs[0]):
        return Path(run_dirs[0])
    return Path(f"report-{time.strftime('%Y%m%d-%H%M%S')}")


def write_report(run_dirs: Sequence[str | Path], *, out: str | Path | None = None, samples: int = 0,
                 vocoder: Any = None, objective: str | None = None) -> ReportFiles:
    """Write ``report.md``, ``report_files/`` and ``report.html`` for ``run_dirs``.

    Args:
        run_dirs: one run directory, or several to compare side by side.
        out: output folder (default: see the module docstring).
        samples: validation items to synthesise per run (0: none).
        vocoder: decodes the samples (None: each run's ``Trainer.vocoder``, else Griffin-Lim).
        objective: what names the best run of a comparison (see `build_document`).

    Raises:
        NotARunError: a path that is not a run directory.
    """
    paths = [Path(p) for p in run_dirs]
    doc = build_document(paths, samples=samples, vocoder=vocoder, objective=objective)
    target = Path(out) if out is not None else default_out(paths)
    created = missing_dirs(target)
    written: list[Path] = []
    try:
        target.mkdir(parents=True, exist_ok=True)
        payloads = [(f.name, f.png) for f in doc.figures()] + [(a.name, a.wav) for a in doc.audios()]
        for name, data in payloads:
            path = target / FILES_DIR / name
            atomic_write_bytes(path, data)
            written.append(path)
        md, html = target / "report.md", target / "report.html"
        atomic_write_text(md, render_markdown(doc, FILES_DIR))
        atomic_write_text(html, render_html(doc))
    except BaseException:
        if created:  # a report folder this call made (a full disk, Ctrl-C): nothing of it is kept
            shutil.rmtree(created[-1], ignore_errors=True)
        raise
    return ReportFiles(md, html, tuple(written))
