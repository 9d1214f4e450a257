"""``flowkit import-f5`` and ``flowkit export-f5``: thin wrappers over
`flowkit.interop.f5_run`. Only typer, pathlib and typing are imported here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def import_f5(
    checkpoint: Annotated[Path, typer.Argument(help="F5-TTS's model_*.safetensors (released) or model_*.pt (its trainer's).")],
    out: Annotated[Path, typer.Option("--out", help="The run directory to write (new or empty).")],
    vocab: Annotated[
        Path | None, typer.Option("--vocab", help="F5-TTS's vocab.txt; default: vocab.txt beside the checkpoint.")
    ] = None,
    config: Annotated[
        str, typer.Option("--config", help="F5TTS_v1_Base, F5TTS_Base, or auto (from the file name).")
    ] = "auto",
) -> None:
    """Import an F5-TTS checkpoint as a flowkit run (for init-from, synthesize, report)."""
    from flowkit.console import console
    from flowkit.interop.f5_run import import_f5 as run_import

    written = run_import(checkpoint, out, vocab_file=vocab, config=config)
    console.print(f"imported {checkpoint} -> {written}", highlight=False, markup=False, soft_wrap=True)


def export_f5(
    checkpoint: Annotated[Path, typer.Argument(help="A checkpoint directory, or a run directory (its best, else newest).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for model.safetensors and vocab.txt.")],
) -> None:
    """Export an F5-architecture model to F5-TTS's released layout (EMA weights + vocab.txt)."""
    from flowkit.console import console
    from flowkit.interop.f5_run import export_f5 as run_export

    model, vocab = run_export(checkpoint, out)
    console.print(f"wrote {model} and {vocab}", highlight=False, markup=False, soft_wrap=True)
