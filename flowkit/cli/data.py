"""`flowkit data STORE...`: what is in the stores, per speaker and language, before training.

Only typer/pathlib/typing are imported at the top; the counting is `flowkit.data.summary`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def _buckets(counts) -> str:
    """Bucket counts ``[6]`` as ``"1:3 2:10 ... ?:1"`` (``?`` unknown)."""
    parts = [f"{b}:{int(n)}" for b, n in enumerate(counts) if b and n]
    if counts[0]:
        parts.append(f"?:{int(counts[0])}")
    return " ".join(parts) or "-"


def print_summary(stores: list[Path], as_json: bool = False) -> None:
    """Print `flowkit.data.summary.summarize` of ``stores`` as tables (or JSON)."""
    from rich.table import Table

    from flowkit.console import console
    from flowkit.data.summary import summarize

    summary = summarize(stores)
    if as_json:
        import json

        console.print_json(json.dumps(summary.to_dict()))
        return
    for title, groups in (("speaker", summary.speakers), ("language", summary.languages)):
        table = Table(title=f"per {title}")
        for column in (title, "segments", "hours", "train", "val", "rate 1..5", "loudness 1..5"):
            table.add_column(column, justify="left" if column in (title, "rate 1..5", "loudness 1..5") else "right")
        for name, g in sorted(groups.items()):
            table.add_row(name, str(g.segments), f"{g.hours:.3f}", str(g.train), str(g.val), _buckets(g.rate),
                          _buckets(g.loudness))
        t = summary.total
        table.add_row("all", str(t.segments), f"{t.hours:.3f}", str(t.train), str(t.val), _buckets(t.rate),
                      _buckets(t.loudness), style="bold")
        console.print(table)
    rejected = ", ".join(f"{reason} {n}" for reason, n in sorted(summary.rejections.items())) or "none"
    console.print(f"rejected at prepare: {rejected}", highlight=False)
    console.print(f"stores: {len(summary.stores)}", highlight=False)


def data(
    stores: Annotated[list[Path], typer.Argument(
        help="Stores made by `flowkit prepare`, or folders of --shard stores.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
) -> None:
    """Per speaker and language: segments, hours, split, rate and loudness buckets; rejections by reason."""
    print_summary(list(stores), as_json)
