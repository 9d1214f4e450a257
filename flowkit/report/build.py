"""`write_report`: read runs, assemble the document, write report.md, its files and report.html.

Output folder: the run directory for one run, ``./report-<timestamp>`` for several, or
``out``. ``report.md`` links PNG and WAV files in ``report_files/``; ``report.html`` embeds
the same files as data URIs and opens offline on its own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.io import atomic_write_bytes, atomic_write_text
from flowkit.report.document import Document, Note, Section
from flowkit.report.render_html import render_html
from flowkit.report.render_md import render_markdown
from flowkit.report.rundir import read_run
from flowkit.report.summary import comparison_sections, generated_note, run_sections

__all__ = ["ReportFiles", "build_document", "write_report"]

FILES_DIR = "report_files"


@attrs.frozen
class ReportFiles:
    """Where a report was written."""

    markdown: Path
    html: Path
    files: tuple[Path, ...]


def build_document(run_dirs: Sequence[Path], *, samples: int = 0, vocoder: Any = None) -> Document:
    """The report document of ``run_dirs`` (one run, or a comparison of several).

    ``vocoder`` decodes the samples (None: each run's ``Trainer.vocoder``, else Griffin-Lim).

    Raises:
        NotARunError: a path that is not a run directory (checked before any work).
        ConfigError: a vocoder that cannot invert a run's latents (see `sample_blocks`).
    """
    runs = [read_run(p) for p in run_dirs]
    if len(runs) == 1:
        run = runs[0]
        sections = run_sections(run)
        title = f"Run report: {run.label}"
    else:
        sections = comparison_sections(runs)
        for k, run in enumerate(runs):
            sections += run_sections(run, prefix=f"run{k + 1}-", title_prefix=f"{run.label}: ")
        title = f"Comparison of {len(runs)} runs: " + ", ".join(r.label for r in runs)
    if samples > 0:
        from flowkit.report.samples import sample_blocks

        for k, run in enumerate(runs):
            prefix = f"run{k + 1}-" if len(runs) > 1 else ""
            label = "Samples" if len(runs) == 1 else f"{run.label}: Samples"
            sections.append(Section(label, sample_blocks(run.path, samples, prefix=prefix, vocoder=vocoder)))
    sections.append(Section("About this report", [Note(generated_note())]))
    return Document(title, sections)


def default_out(run_dirs: Sequence[Path]) -> Path:
    """The run directory itself for one run; a new ``report-<timestamp>`` for several."""
    if len(run_dirs) == 1:
        return Path(run_dirs[0])
    return Path(f"report-{time.strftime('%Y%m%d-%H%M%S')}")


def write_report(run_dirs: Sequence[str | Path], *, out: str | Path | None = None, samples: int = 0,
                 vocoder: Any = None) -> ReportFiles:
    """Write ``report.md``, ``report_files/`` and ``report.html`` for ``run_dirs``.

    Args:
        run_dirs: one run directory, or several to compare side by side.
        out: output folder (default: see the module docstring).
        samples: validation items to synthesise per run (0: none).
        vocoder: decodes the samples (None: each run's ``Trainer.vocoder``, else Griffin-Lim).

    Raises:
        NotARunError: a path that is not a run directory.
    """
    paths = [Path(p) for p in run_dirs]
    doc = build_document(paths, samples=samples, vocoder=vocoder)
    target = Path(out) if out is not None else default_out(paths)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    payloads = [(f.name, f.png) for f in doc.figures()] + [(a.name, a.wav) for a in doc.audios()]
    for name, data in payloads:
        path = target / FILES_DIR / name
        atomic_write_bytes(path, data)
        written.append(path)
    md, html = target / "report.md", target / "report.html"
    atomic_write_text(md, render_markdown(doc, FILES_DIR))
    atomic_write_text(html, render_html(doc))
    return ReportFiles(md, html, tuple(written))
