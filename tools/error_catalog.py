"""Build the catalogue of user-facing error messages in docs/troubleshooting.md.

Every `FlowkitError` that flowkit raises is found in the source (with `ast`, nothing is
imported) and listed under its class with its exit code, the message template (values
filled at run time appear as ``<...>``) and where it is raised. The hand-written part of
the page sits above the marker line and is kept as it is.

    .venv/bin/python tools/error_catalog.py            # rewrite docs/troubleshooting.md
    .venv/bin/python tools/error_catalog.py --check    # exit 1 when the page is stale
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "troubleshooting.md"
MARKER = "<!-- generated below by tools/error_catalog.py; do not edit by hand -->"

# class -> (exit code, what the class means); subclasses defined outside errors.py inherit
CLASSES = {
    "RegistryError": (2, "a component name, a plugin, or a registration"),
    "ConfigError": (2, "a gin file, a binding, or a setting's value"),
    "DataError": (3, "a store, an input file, or the data of a run"),
    "BudgetError": (3, "an item that does not fit the batch budget (a DataError)"),
    "ResumeError": (4, "a run directory that cannot be started or resumed as asked"),
    "CheckpointError": (4, "a checkpoint that is missing, corrupt, or does not fit"),
    "TrainingError": (5, "training stopped: non-finite values, a full disk, a busy run"),
    "WriteError": (6, "an output the file system refuses: read-only, full, or not permitted"),
    "FlowkitError": (1, "other user errors"),
}


def _template(node: ast.expr) -> str | None:
    """The message of a raise as text, run-time values shown as <expr>."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                out.append(f"<{ast.unparse(part.value)}>")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        if left is not None and right is not None:
            return left + right
        if left is not None:
            return left + f"<{ast.unparse(node.right)}>"
    if isinstance(node, ast.Name):
        return f"<{node.id}>"
    return None


def collect() -> dict[str, list[tuple[str, str]]]:
    """``{class: [(message template, "module:function"), ...]}`` over flowkit/."""
    found: dict[str, list[tuple[str, str]]] = {name: [] for name in CLASSES}
    for path in sorted((REPO / "flowkit").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            for node in ast.walk(func):
                if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                    continue
                name = node.exc.func.id if isinstance(node.exc.func, ast.Name) else None
                if name not in CLASSES or not node.exc.args:
                    continue
                text = _template(node.exc.args[0])
                if text is None:
                    continue
                text = " ".join(text.split())
                if all(text != seen for seen, _ in found[name]):  # nested functions: keep one
                    found[name].append((text, f"{module}:{func.name}"))
    return found


def render(found: dict[str, list[tuple[str, str]]]) -> str:
    lines = [MARKER, "", "## Every error message", ""]
    total = sum(len(v) for v in found.values())
    lines.append(f"{total} messages, by class. `<...>` stands for a value filled in at run time.")
    lines.append("")
    for name, (code, what) in CLASSES.items():
        entries = found[name]
        if not entries:
            continue
        lines += [f"### {name} (exit code {code}): {what}", "", "| message | raised in |", "|---|---|"]
        for text, where in sorted(entries):
            cell = text.replace("|", "\\|")
            lines.append(f"| {cell} | `{where}` |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page is stale")
    args = parser.parse_args()
    current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    head = current.split(MARKER)[0] if MARKER in current else current
    page = head.rstrip() + "\n\n" + render(collect())
    if args.check:
        if page != current:
            print(f"{PAGE} is stale: run .venv/bin/python tools/error_catalog.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
