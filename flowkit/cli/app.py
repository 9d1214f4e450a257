"""The ``flowkit`` command line.

Commands are thin: each parses its options and calls a library function. This module and
the command modules import only typer at the top so that ``flowkit --help`` and every
``COMMAND --help`` answer without importing torch, zarr or gin; the work's imports happen
inside the command bodies.

Errors: a `flowkit.errors.FlowkitError` prints one line (``error: ...``) to stderr and exits
with its ``exit_code`` (see docs/cli.md); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from flowkit.cli import align as align_cmd
from flowkit.cli import checkpoints as checkpoints_cmd
from flowkit.cli import curate as curate_cmd
from flowkit.cli import data as data_cmd
from flowkit.cli import eval as eval_cmd
from flowkit.cli import f5 as f5_cmd
from flowkit.cli import prepare as prepare_cmd
from flowkit.cli import report as report_cmd
from flowkit.cli import sweep as sweep_cmd
from flowkit.cli import train as train_cmd

app = typer.Typer(
    name="flowkit",
    # plain click help: typer's rich help imports rich and markdown-it (~0.3 s at start-up)
    rich_markup_mode=None,
    suggest_commands=False,  # click suggests already ("Did you mean ...?")
    help=(
        "Train flow-matching text-to-speech models from gin experiments.\n\n"
        "Start with: flowkit train gin/quickstart.gin --out runs/quickstart\n\n"
        "Every component: flowkit plugins. Docs: docs/ in the repository."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_STATE = {"debug": False}

EXIT_INTERRUPTED = 130


def _fail(message: str, code: int) -> None:
    from flowkit.console import err_console

    # emoji=False: a ":x:" quoted from the user's file is printed as written, not as an emoji
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True, markup=True, highlight=False, emoji=False)
    raise typer.Exit(code)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command body; user errors become one line and a non-zero exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from flowkit.errors import FlowkitError

        if _STATE["debug"]:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except FlowkitError as exc:
            from flowkit.config import one_line

            _fail(_escape(one_line(exc)), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)
        except (TypeError, ValueError) as exc:
            # gin marks errors raised while it builds a configurable; those come from a
            # config value (a wrong argument), not from flowkit itself
            if "In call to configurable" not in str(exc):
                raise
            from flowkit.config import one_line

            _fail(_escape(f"config: {one_line(exc)}"), 2)

    return wrapper


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks for errors.")] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True,
                                          callback=lambda value: _print_version(value))] = False,
) -> None:
    """Train flow-matching text-to-speech models from gin experiments.

    Quick start: `flowkit train gin/quickstart.gin --out runs/quickstart`.
    Docs: docs/ in the repository; every component: `flowkit plugins`.
    """
    _STATE["debug"] = debug


def _print_version(value: bool) -> None:
    """``--version``: eager, so it works alone (before typer asks for a command)."""
    if value:
        from flowkit import __version__

        typer.echo(f"flowkit {__version__}")
        raise typer.Exit(0)


@app.command("plugins")
@guarded
def plugins(
    kind: Annotated[str | None, typer.Argument(help="Only this kind (schedule, loss, ...).")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the gin reference as markdown.")] = False,
) -> None:
    """List registered components: kind, name, source distribution, summary, parameters."""
    from flowkit import entry_points, registry
    from flowkit.cli.plugins_view import entry_point, print_markdown, print_table
    from flowkit.errors import RegistryError

    try:  # every installed plugin, so each shows its summary and parameters (FLOWKIT_NO_PLUGINS=1: flowkit's own)
        registry.load_plugins()
    except RegistryError as exc:  # a broken plugin: the rest are listed, third-party ones from their metadata
        from flowkit.console import err_console

        registry.load_plugins(third_party=False)
        err_console.print(f"warning: {exc}; third-party components are listed from their metadata only",
                          markup=False, highlight=False, soft_wrap=True)
    entry = entry_point(kind) if kind else None  # `flowkit plugins Trainer`: the entry point's settings
    comps = [entry] if entry is not None else registry.components(kind)
    if markdown:
        print_markdown(comps)
    else:
        own = {(c.kind, c.name) for c in comps}
        declared = [] if entry is not None else [
            e for e in entry_points.discover() if (kind is None or e.kind == kind) and (e.kind, e.name) not in own]
        print_table(comps, kind, declared)


@app.command("config")
@guarded
def config(
    files: Annotated[list[Path], typer.Argument(help="Gin files, in order (includes resolved).")],
    binding: Annotated[
        list[str] | None, typer.Option("-b", "--binding", help="A gin binding, applied last; repeatable.")
    ] = None,
    data: Annotated[
        list[Path] | None,
        typer.Option("--data", help="A latent store (or shard folder) to check the config against, as train "
                     "would use it; repeatable."),
    ] = None,
) -> None:
    """Parse a config, check its values as train does, and print every binding in force.

    With --data (as train's) the stores are opened and checked as a start would (same
    encoder in every store, each store once, a non-empty training split, the vocoder)."""
    from flowkit import config as gin_config
    from flowkit.console import console
    from flowkit.train.run import option_bindings

    parsed = gin_config.parse(files, [*(binding or ()), *option_bindings(data or (), None)])
    from flowkit.train.settings import Trainer

    settings = Trainer()  # builds every component: a value train would refuse is refused here too
    checked = None
    if data:
        from flowkit.train.parts import check_data

        checked = check_data(settings, " ".join(str(f) for f in files))
    # never wrapped: the output is gin text meant to be read back (a wrapped comment is a syntax error)
    console.print(f"# files: {', '.join(str(f) for f in parsed.files)}", highlight=False, markup=False, soft_wrap=True)
    if parsed.bindings:
        console.print(f"# bindings: {'; '.join(parsed.bindings)}", highlight=False, markup=False, soft_wrap=True)
    if checked is not None:
        console.print(f"# data: {checked}", highlight=False, markup=False, soft_wrap=True)
    console.print(gin_config.config_text(), highlight=False, markup=False, soft_wrap=True)


app.command("prepare")(guarded(prepare_cmd.prepare))
app.add_typer(align_cmd.app, name="align")
for _name, _fn in align_cmd.COMMANDS:
    align_cmd.app.command(_name)(guarded(_fn))
app.command("curate")(guarded(curate_cmd.curate))
app.command("data")(guarded(data_cmd.data))
app.command("train", epilog=train_cmd.EXIT_CODES)(guarded(train_cmd.train))
app.command("resume", epilog=train_cmd.EXIT_CODES)(guarded(train_cmd.resume))
app.command("init-from", epilog=train_cmd.EXIT_CODES)(guarded(train_cmd.init_from))
app.command("sweep", epilog=sweep_cmd.EXIT_CODES)(guarded(sweep_cmd.sweep))
app.command("report")(guarded(report_cmd.report))
app.command("synthesize")(guarded(report_cmd.synthesize))
app.command("eval")(guarded(eval_cmd.evaluate))
app.command("import-f5")(guarded(f5_cmd.import_f5))
app.command("export-f5")(guarded(f5_cmd.export_f5))
app.command("average")(guarded(checkpoints_cmd.average))
app.command("merge-adapter")(guarded(checkpoints_cmd.merge_adapter))


def main() -> None:
    """Console-script entry point."""
    app(prog_name="flowkit")


if __name__ == "__main__":
    sys.exit(main())
