"""``flowkit curate``: a thin wrapper over `flowkit.curation.run.curate`. Only typer,
pathlib and typing are imported here; the judges load inside the command body.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def curate(
    sources: Annotated[list[Path], typer.Argument(
        help="What prepare reads: folders with metadata.csv + wavs/, .jsonl/.csv manifests, LibriTTS, Lhotse or "
             "Hugging Face data.")],
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Curation folder: measures.jsonl, decisions.jsonl/.csv, keep.lst, curation.json, "
                            "curation.html. Run again to continue.")],
    config: Annotated[list[Path] | None, typer.Option(
        "--config", "-c",
        help="gin files (default: gin/curate.gin's settings, the defaults of every criterion).")] = None,
    binding: Annotated[list[str] | None, typer.Option(
        "--binding", "-b",
        help='gin binding, e.g. -b "criterion.transcript_cer.floor = 0.4" or -b "Curation.workers = 2".')] = None,
    input_format: Annotated[str, typer.Option(
        "--format", help="Input kind: auto, ljspeech, manifest, libritts, lhotse, hf.")] = "auto",
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Judge every clip (Whisper CER, DNSMOS, speaking rate, speaker distance, clipping,
    silence) and write the keep/drop list with the reason per clip; the source is only read.

    Then: flowkit prepare SOURCE --keep OUT/keep.lst --out STORE.
    """
    from flowkit import config as gin_config
    from flowkit.console import console
    from flowkit.curation.run import Curation
    from flowkit.curation.run import curate as run_curate
    from flowkit.io import check_out_path

    check_out_path(out, label=f"--out {out}", folder=True)
    gin_config.parse(config or (), binding or ())
    outcome = run_curate(sources, out, settings=Curation(), progress=not quiet, input_format=input_format)
    dropped = ", ".join(f"{name} {n}" for name, n in outcome.dropped_by.items())
    console.print(f"curate: {outcome.clips} clips ({outcome.audio_seconds / 60:.1f} min), kept {outcome.kept}, "
                  f"dropped {outcome.clips - outcome.kept} (by criterion: {dropped}; unreadable {outcome.unreadable})",
                  markup=False, highlight=False, soft_wrap=True)
    if outcome.measured_now:
        console.print(f"measured {outcome.measured_now} clips in {outcome.measure_seconds:.1f} s "
                      f"({outcome.audio_seconds / max(outcome.measure_seconds, 1e-9):.0f}x real time over the whole "
                      "source)" if outcome.measured_now == outcome.clips else
                      f"measured {outcome.measured_now} clips in {outcome.measure_seconds:.1f} s",
                      markup=False, highlight=False)
    for note in outcome.notes:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
    if outcome.rejected_lines:
        n = outcome.rejected_lines
        console.print(f"{n} {'line' if n == 1 else 'lines'} of the source not a clip (no text, an id given twice, "
                      f"...): neither kept nor judged; the reasons in {out}/curation.json (rejected_lines)",
                      markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {out}/keep.lst, decisions.jsonl, decisions.csv, curation.html", markup=False, highlight=False)
