"""Rendering of the registry for ``flowkit plugins``: a rich table, or markdown for docs."""

from __future__ import annotations

from collections.abc import Sequence

from flowkit import entry_points
from flowkit.entry_points import PluginEntry
from flowkit.registry import Component


def _params(comp: Component) -> str:
    return ", ".join(f"{n}={d}" for n, _, d in comp.parameters())


def print_table(comps: Sequence[Component], kind: str | None, declared: Sequence[PluginEntry] = ()) -> None:
    """One entry per component: ``kind.name (distribution)``, then its summary and parameters
    wrapped at whole words to the terminal (80 columns when piped), so no word is cut."""
    import textwrap

    from flowkit.console import console

    width = max(40, min(console.width, 100))
    out = [f"flowkit components ({kind})" if kind else "flowkit components", ""]
    for c in comps:
        name = c.gin_name if c.kind else c.name
        out.append(f"{name}  ({c.distribution or '-'})")
        for label, text in (("", c.summary), ("parameters: ", _params(c))):
            if text:
                out += textwrap.wrap(label + text, width, initial_indent="    ", subsequent_indent="      ",
                                     break_long_words=False, break_on_hyphens=False)
    for e in declared:  # third-party entries, listed from their metadata without importing them
        out.append(f"{e.gin_name}  ({e.distribution})")
        out.append("    (declared in its metadata; not imported)")
    out.append("")
    out.append(f"{len(comps) + len(declared)} components; use one in gin as @<kind>.<name>(), "
               "e.g. @schedule.cosine_vpred()")
    console.print("\n".join(out), markup=False, highlight=False, soft_wrap=True)


def entry_point(name: str) -> Component | None:
    """flowkit's gin entry point named ``name`` (``Trainer``, ``prepare``, ...), or None."""
    return next((c for c in _entry_points() if c.name == name), None)


def _table(params: Sequence[tuple[str, str, str]]) -> list[str]:
    if not params:
        return []
    rows = ["| parameter | type | default |", "|---|---|---|"]
    rows += [f"| `{n}` | `{t}` | `{d}` |" for n, t, d in params]
    return [*rows, ""]


def _entry_points() -> list[Component]:
    """flowkit's gin-configurable entry points that are not components (``Trainer``, ...)."""
    import gin

    out = []
    for _, configurable in gin.config._REGISTRY.items():  # gin 0.5 has no public listing
        module = configurable.module or ""
        wrapped = configurable.wrapped
        if module in entry_points.declared_kinds() or not getattr(wrapped, "__module__", "").startswith("flowkit."):
            continue
        out.append(Component("", configurable.name, wrapped, wrapped.__module__, "flowkit"))
    return sorted(out, key=lambda c: c.name)


def markdown(comps: Sequence[Component]) -> str:
    """The gin reference: every component with its parameters, types and defaults."""
    lines = [
        "# gin reference",
        "",
        "Generated from the registry by `FLOWKIT_NO_PLUGINS=1 flowkit plugins --markdown`",
        "(a test keeps it in sync); do not edit by hand. Use a component in gin as",
        "`@<kind>.<name>()` and set a parameter with `<kind>.<name>.<parameter> = value`.",
        "",
        "## Entry points",
        "",
        "Settings objects configured directly (`Trainer.steps = 1000`).",
        "",
    ]
    for entry in _entry_points():
        lines += [f"### `{entry.name}`", "", entry.summary or "(no summary)", "", f"Source: `{entry.module}`", ""]
        lines += _table(entry.parameters())
    for kind, what in entry_points.kinds().items():
        of_kind = [c for c in comps if c.kind == kind]
        if not of_kind:
            continue
        lines += [f"## {kind}", "", what, ""]
        for c in of_kind:
            lines += [f"### `{c.gin_name}`", "", c.summary or "(no summary)", ""]
            lines += [f"Source: `{c.module}` ({c.distribution or 'unknown'})", ""]
            lines += _table(c.parameters())
    return "\n".join(lines)


def print_markdown(comps: Sequence[Component]) -> None:
    import sys

    sys.stdout.write(markdown(comps) + "\n")
