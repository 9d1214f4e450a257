"""``flowkit import-f5`` and ``flowkit export-f5``: thin wrappers over
`flowkit.interop.f5_run`. Only typer, pathlib and typing are imported here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def import_f5(
    checkpoint: Annotated[Path, typer.Argument(
        help="F5-TTS's model_*.safetensors (released) or model_*.pt (its trainer's).")],
    out: Annotated[Path, typer.Option("--out", help="The run directory to write (new or empty).")],
    vocab: Annotated[
        Path | None, typer.Option("--vocab", help="F5-TTS's vocab.txt; default: vocab.txt beside the checkpoint.")
    ] = None,
    config: Annotated[
        str, typer.Option("--config", help="F5TTS_v1_Base, F5TTS_Base, or auto (export-f5's flowkit_export.json "
                          "beside the file, else the file name).")
    ] = "auto",
) -> None:
    """Import an F5-TTS checkpoint as a flowkit run (for init-from, synthesize, report)."""
    from flowkit.console import console
    from flowkit.interop.f5_run import import_f5 as run_import
    from flowkit.interop.f5_run import imported_record
    from flowkit.io import refused_writes

    _check_out(out)
    with refused_writes(f"--out {out}", out.parent):  # the run is written beside --out, then renamed
        written = run_import(checkpoint, out, vocab_file=vocab, config=config)
    record = imported_record(written)
    read = f" ({record['dtype']} weights, as float32)" if record.get("dtype") not in (None, "float32") else ""
    console.print(f"imported {checkpoint}{read} as {record['config']} -> {written}", highlight=False, markup=False,
                  soft_wrap=True)


def export_f5(
    checkpoint: Annotated[Path, typer.Argument(
        help="A checkpoint directory, or a run directory (its best, else newest).")],
    out: Annotated[Path, typer.Option(
        "--out", help="A new (or empty) folder for model.safetensors, vocab.txt and flowkit_export.json.")],
) -> None:
    """Export an F5-architecture model to F5-TTS's released layout (EMA weights + vocab.txt)."""
    from flowkit.console import console
    from flowkit.interop.f5_run import EXPORT_RECORD
    from flowkit.interop.f5_run import export_f5 as run_export
    from flowkit.io import refused_writes

    _check_out(out)
    with refused_writes(f"--out {out}", out.parent):  # the folder is written beside --out, then renamed
        model, vocab = run_export(checkpoint, out)
    console.print(f"wrote {model}, {vocab} and {model.parent / EXPORT_RECORD} (the config, for import-f5)",
                  highlight=False, markup=False, soft_wrap=True)


def _check_out(out: Path) -> None:
    """Both commands write a hidden folder beside ``out`` and rename it: both must be writable."""
    from flowkit.io import check_writable

    check_writable(out, label=f"--out {out}")
    check_writable(out.parent, label=f"--out {out}")
