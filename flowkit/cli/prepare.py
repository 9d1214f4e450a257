"""`flowkit prepare`: build or extend a latent store from audio and transcripts.

Only typer/pathlib/typing are imported here; the work happens in `flowkit.data.prepare`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def prepare(
    inputs: Annotated[list[Path] | None, typer.Argument(
        help="Folders with metadata.csv + wavs/, .jsonl/.csv manifests, LibriTTS folders, Lhotse manifests, "
             "Hugging Face save_to_disk folders or parquet files.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", "-o",
        help="The store to write, e.g. data/corpus.zarr (with --shard: the folder of shard stores).")] = None,
    encoder: Annotated[str, typer.Option(help="Encoder plugin (see `flowkit plugins encoder`).")] = "log_mel",
    binding: Annotated[list[str] | None, typer.Option(
        "--binding", "-b",
        help='gin binding, e.g. -b "prepare.max_seconds = 12" or -b "encoder.log_mel.n_mels = 100".')] = None,
    workers: Annotated[int, typer.Option(help="Worker processes that decode and encode (the parent writes).")] = 2,
    append: Annotated[bool, typer.Option("--append", help="Add the inputs' segments to an existing store.")] = False,
    textgrids: Annotated[Path | None, typer.Option(
        help="Folder of Montreal Forced Aligner TextGrids (<id>.TextGrid or <speaker>/<id>.TextGrid).")] = None,
    align: Annotated[str | None, typer.Option(
        help="Aligner plugin that estimates word timings where no TextGrid exists, e.g. 'energy'.")] = None,
    layout: Annotated[str | None, typer.Option(
        help="metadata.csv columns, e.g. id,text,speaker,language (default: auto).")] = None,
    input_format: Annotated[str, typer.Option(
        "--format",
        help="Input kind: auto, ljspeech, manifest, libritts, lhotse, hf (default: by what each input is).")] = "auto",
    shard: Annotated[str | None, typer.Option(
        help="Write only part INDEX of COUNT (INDEX from 0) as OUT/shard-INDEX-of-COUNT.zarr, "
             "e.g. --shard 0/4.")] = None,
    summary: Annotated[bool, typer.Option(
        "--summary", help="Then print the data summary of the store (as `flowkit data`).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
    keep: Annotated[Path | None, typer.Option(
        "--keep", help="Only these segment ids (one a line, e.g. flowkit curate's OUT/keep.lst); the others are "
                       "rejected as curated_out.")] = None,
    verify: Annotated[Path | None, typer.Option(
        "--verify", help="Check an existing store against the checksums prepare recorded (every latent chunk and "
                         "metadata array); writes nothing.")] = None,
) -> None:
    """Decode, check and encode audio into a latent store; print what was accepted and rejected."""
    import attrs

    from flowkit.config import parse_bindings
    from flowkit.console import console
    from flowkit.data import prepare as prep
    from flowkit.data.shards import parse_shard
    from flowkit.errors import ConfigError
    from flowkit.registry import get

    if verify is not None:
        if inputs or out is not None or append:
            raise ConfigError("prepare --verify STORE takes no inputs, --out or --append; run it on its own")
        _verify(verify)
        return
    if not inputs or out is None:
        raise ConfigError("prepare needs INPUTS... and --out STORE (or --verify STORE to check a store)")
    from flowkit.io import check_writable, refused_writes

    where = f"--out {out}"
    check_writable(out, label=where)  # a read-only, full or locked disk: refused before any decoding
    part = parse_shard(shard) if shard is not None else None
    parse_bindings(binding or ())
    settings = prep.PrepareSettings()
    changes = {"encoder": settings.encoder or get("encoder", encoder).obj()}
    if align is not None:
        changes["aligner"] = get("aligner", align).obj()
    if layout is not None:
        changes["layout"] = layout
    settings = attrs.evolve(settings, **changes)
    with refused_writes(where, out):  # nothing is published: the store's partial folder is removed
        done = prep.prepare_store(inputs, out, settings=settings, workers=workers, append=append,
                                  textgrids=textgrids, progress=not quiet, input_format=input_format, shard=part,
                                  keep=keep)
    from rich.table import Table

    table = Table(title="flowkit prepare", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    for what, value in done.table_rows():
        table.add_row(what, value)
    console.print(table)
    from flowkit.console import err_console

    for line in [*done.notes, *done.split_warnings()]:
        err_console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    if summary:
        from flowkit.cli.data import print_summary

        print_summary([done.store])


def _verify(path: Path) -> None:
    from flowkit.console import console
    from flowkit.data.store import StoreReader, verify_store

    reader = StoreReader.open(path)  # the metadata checksums and every chunk file's size
    try:
        chunks = verify_store(reader)
    finally:
        reader.close()
    if chunks:
        what = (f"{chunks} latent chunks and {len(reader.attrs['checksums']['arrays'])} metadata arrays "
                "match their checksums")
    else:
        what = "no checksums recorded (prepared by an older flowkit); the recomputed fingerprint matches"
    console.print(f"{path}: ok, {reader.n_segments} segments; {what}", highlight=False, soft_wrap=True)
