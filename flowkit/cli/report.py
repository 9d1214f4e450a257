"""``flowkit report`` and ``flowkit synthesize`` (bodies in flowkit.report and flowkit.synth)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories.")],
    samples: Annotated[int, typer.Option("--samples", help="Validation items to synthesise.")] = 0,
    out: Annotated[Optional[Path], typer.Option("--out", help="Output directory.")] = None,
) -> None:
    """Write report.md and a self-contained report.html for one or more runs."""
    from flowkit.errors import FlowkitError

    raise FlowkitError("flowkit report is not built yet")


def synthesize(
    checkpoint: Annotated[Path, typer.Argument(help="A checkpoint or run directory.")],
    text: Annotated[str, typer.Option("--text", help="Text to speak.")],
    out: Annotated[Path, typer.Option("--out", help="Output .wav file.")],
) -> None:
    """Synthesise one utterance to a wav file."""
    from flowkit.errors import FlowkitError

    raise FlowkitError("flowkit synthesize is not built yet")
