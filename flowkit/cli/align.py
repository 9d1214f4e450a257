"""``flowkit align``: train a learned aligner on a store, write its timings into the store,
score timings against a reference, and choose which timings a store serves."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="align", no_args_is_help=True, rich_markup_mode=None, add_completion=False,
    help="Unit timings for recordings without them: a learned aligner (docs/alignment.md).",
)

Binding = Annotated[list[str] | None, typer.Option("-b", "--binding", help="A gin binding, applied last; repeatable.")]


def train(
    config: Annotated[list[Path], typer.Argument(help="Gin files of the aligner experiment (e.g. gin/align.gin).")],
    out: Annotated[Path, typer.Option("--out", help="The aligner run's folder; rerun the same command to continue.")],
    data: Annotated[list[Path] | None, typer.Option("--data", help="A latent store to align; repeatable.")] = None,
    binding: Binding = None,
    steps: Annotated[int | None, typer.Option("--steps", min=1, help="Training steps (AlignRun.steps).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Train the learned aligner on the stores' latents and texts (or continue the run in --out)."""
    from flowkit.align.training import train_aligner
    from flowkit.console import say

    last = train_aligner(config, binding or (), data=data or (), out=out, steps=steps, progress=not quiet)
    say(f"aligner run: {out} (checkpoint {last.name}; report {out / 'report.html'})")
    say(f"next: flowkit align write STORE --run {out}")


def write(
    store: Annotated[Path, typer.Argument(help="The latent store to write timings into.")],
    run: Annotated[Path, typer.Option("--run", help="The aligner run (or one of its checkpoints).")],
    name: Annotated[str, typer.Option("--name", help="The timings version's name.")] = "learned",
    reference: Annotated[Path | None, typer.Option(
        "--reference", help="A folder of reference TextGrids (<id>.TextGrid, tiers words and phones) to score "
        "every version of the store against.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Align every segment of STORE with the aligner run and make its timings the store's active ones.

    The store's other timings are kept (`flowkit align use STORE prepare` switches back).
    Segments with no honest alignment get none and a line in STORE/rejections.jsonl.
    """
    from flowkit.align.apply import align_store
    from flowkit.console import say

    outcome = align_store(store, run, name=name, progress=not quiet)
    refused = ", ".join(f"{k} {v}" for k, v in sorted(outcome.refused.items())) or "none"
    say(f"timings {outcome.name!r}: {outcome.aligned} segments aligned, refused: {refused} "
        f"(written to {store}; active)")
    score_table(store, reference, outcome)


def score_table(store: Path, reference: Path | None, outcome: object | None) -> None:
    """Print each timings version's boundary error against the reference (TextGrids, else
    the store's forced-aligned prepare timings); nothing when there is no reference."""
    from rich.table import Table

    from flowkit.align.scoring import (
        phone_boundary_errors,
        store_timings,
        textgrid_phones,
        textgrid_timings,
        word_boundary_errors,
    )
    from flowkit.console import console, say

    found = store_timings(store)
    if reference is not None:
        ref = textgrid_timings(store, reference)
        source = f"TextGrids in {reference}"
    else:
        ref = found.pop("prepare", {})
        source = "the store's forced-aligned prepare timings"
    if not ref:
        say("boundary error: no reference timings (give --reference DIR of TextGrids to score)")
        return
    table = Table(title=f"boundary error in frames against {source} ({len(ref)} segments)")
    for col in ("timings", "segments", "boundaries", "mean", "median", "p90"):
        table.add_column(col, justify="left" if col == "timings" else "right")
    for name, units in found.items():
        e = word_boundary_errors(ref, units)
        table.add_row(f"{name}: words", str(e.segments), str(e.count), f"{e.mean:.2f}", f"{e.median:.1f}",
                      f"{e.p90:.1f}")
    if reference is not None and outcome is not None:
        from flowkit.align.apply import phone_timings

        est = phone_timings(outcome)
        refp = textgrid_phones(store, reference)
        e, coverage = phone_boundary_errors(refp, est)
        table.add_row(f"{outcome.name}: phonemes ({coverage:.0%} of phones comparable)", str(e.segments), str(e.count),
                      f"{e.mean:.2f}", f"{e.median:.1f}", f"{e.p90:.1f}")
    console.print(table)


def score(
    store: Annotated[Path, typer.Argument(help="A latent store with more than one timings version.")],
    reference: Annotated[Path | None, typer.Option(
        "--reference",
        help="A folder of reference TextGrids; default: the store's forced-aligned prepare timings.")] = None,
) -> None:
    """Boundary error of each of STORE's timings versions against the reference, in frames."""
    score_table(store, reference, None)


def use(
    store: Annotated[Path, typer.Argument(help="The latent store.")],
    name: Annotated[str, typer.Argument(help="The version to serve: 'prepare' or a name given to align write.")],
) -> None:
    """Choose which timings version STORE serves to training."""
    from flowkit.console import say
    from flowkit.data.store import StoreReader
    from flowkit.data.store.timings import use_version

    StoreReader.open(store).close()  # a missing path, a file or a damaged store: one DataError
    previous = use_version(store, name)
    say(f"{store}: serves timings {name!r} (was {previous!r})")


def report(run: Annotated[Path, typer.Argument(help="An aligner run folder.")]) -> None:
    """Rewrite an aligner run's report (loss curve and alignment plots) from its newest checkpoint."""
    from flowkit.align.apply import load_aligner
    from flowkit.align.corpus import load_corpus
    from flowkit.align.plots import write_report
    from flowkit.console import say

    model, vocab, meta, _ = load_aligner(run)
    import json

    stores = json.loads((run / "run_info.json").read_text(encoding="utf-8"))["stores"]
    corpus, _, _ = load_corpus(stores, vocab, meta["stats"], progress=False)
    say(f"report: {write_report(run, corpus=corpus, model=model)}")


#: The sub-commands; flowkit.cli.app registers them with its error handling.
COMMANDS = (("train", train), ("write", write), ("score", score), ("use", use), ("report", report))
