"""``flowkit average`` and ``flowkit merge-adapter``: thin wrappers over
`flowkit.checkpoints.averaging` and `flowkit.adapters`. Only typer, pathlib and typing are
imported here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def average(
    sources: Annotated[list[Path], typer.Argument(
        help="A run directory (with --last or --best), or two or more checkpoint directories (with --out).")],
    last: Annotated[int | None, typer.Option("--last", help="Average the run's K newest checkpoints.")] = None,
    best: Annotated[int | None, typer.Option(
        "--best",
        help="Average the run's K kept checkpoints with the lowest EMA validation loss (metrics.jsonl).")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="The folder for the averaged checkpoint; default RUN/averaged/last<K> or best<K>.")] = None,
) -> None:
    """Average checkpoints of one config into one checkpoint (for synthesize, eval, init-from).

    The average records which checkpoints went in and how they were chosen (meta.json
    "averaged"); checkpoints of different configs are refused."""
    from flowkit.checkpoints.averaging import average_checkpoints, average_run
    from flowkit.console import console
    from flowkit.errors import CheckpointError
    from flowkit.io import check_out_path, check_writable, refused_writes

    if out is not None:
        check_out_path(out, label=f"--out {out}", folder=True)
    if len(sources) == 1 and (last is not None or best is not None):
        target = out if out is not None else sources[0] / "averaged"
        check_writable(target, label=f"--out {target}")
        with refused_writes(f"--out {target}", target):
            done = average_run(sources[0], last=last, best=best, out=out)
    else:
        if last is not None or best is not None:
            raise CheckpointError("average: --last and --best choose from one run directory; give one RUN, or "
                                  "give checkpoint directories without them")
        if len(sources) < 2 or out is None:
            raise CheckpointError("average: give RUN with --last K or --best K, or two or more checkpoint "
                                  "directories with --out DIR")
        for source in sources:
            if (source / "checkpoints").is_dir():
                raise CheckpointError(
                    f"average: {source} is a run directory, not a checkpoint; give its checkpoints "
                    f"({source / 'checkpoints'}/step-...), or the run alone with --last K or --best K")
        check_writable(out, label=f"--out {out}")
        with refused_writes(f"--out {out}", out):
            done = average_checkpoints(sources, out, how=f"given {len(sources)}")
    steps = ", ".join(str(step) for step, _ in done.chosen)
    console.print(f"averaged {len(done.chosen)} checkpoint(s) ({done.how}: steps {steps}) -> {done.path}",
                  highlight=False, markup=False, soft_wrap=True)


def merge_adapter(
    adapter: Annotated[Path, typer.Argument(help="An adapter checkpoint (or the run directory of an adapter run).")],
    out: Annotated[Path, typer.Option("--out", help="The folder for the merged full checkpoint (step-N/ inside).")],
    base: Annotated[Path | None, typer.Option(
        "--base", help="The base checkpoint, where it has moved; default: the one the adapter's meta names.")] = None,
) -> None:
    """Merge an adapter checkpoint onto its base into a full checkpoint (synthesize, eval, init-from, average).

    A base other than the adapter's own (another state.pt sha256) is refused."""
    from flowkit.adapters.files import merge_adapter as run_merge
    from flowkit.console import console
    from flowkit.io import check_writable, refused_writes

    check_writable(out, label=f"--out {out}")
    with refused_writes(f"--out {out}", out):
        path = run_merge(adapter, out, base=base)
    console.print(f"merged {adapter} onto its base -> {path}", highlight=False, markup=False, soft_wrap=True)
