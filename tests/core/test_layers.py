"""Imports point down: every module of flowkit/ imports only from its own layer or lower ones.

The layers, bottom to top (a unit is a sub-package, a module, or - where a package spans
two layers - one of its modules: the longest declared name wins). A module may
import its own unit and any unit of a lower layer; a unit of the same layer or a higher
one is refused, so no cycle between units can form. `flowkit/cli/` is the top: nothing in
flowkit imports it (``flowkit/__main__.py`` is the command line's own entry).
Both module-level and function-level imports count (read from the source, so an import
hidden inside a function body is seen too).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "flowkit"

LAYERS: list[list[str]] = [
    ["flowkit.errors"],
    ["flowkit.io", "flowkit.console", "flowkit.protocols", "flowkit.processes"],  # io raises WriteError
    ["flowkit.entry_points"],  # what installed distributions declare (kinds, plugins): metadata only
    ["flowkit.registry", "flowkit.hub"],  # hub: hf:// references to local cached paths
    ["flowkit"],  # the public API: flowkit.register, flowkit.FlowkitError
    ["flowkit.config"],
    ["flowkit.text"],  # text front ends: token ids of a text (chars, F5 tokens, phonemes)
    # the checkpoint format: written by training, read by synthesis, reports and interop
    ["flowkit.checkpoints"],
    ["flowkit.data", "flowkit.flow", "flowkit.judges"],
    # what a run swaps into a built model: CPU kernels, activation checkpointing (torch only)
    ["flowkit.converters"],
    ["flowkit.model"],
    # adapters on a built model and their checkpoints: trained by train, merged by synth
    ["flowkit.adapters"],
    ["flowkit.losses", "flowkit.batching"],
    ["flowkit.loggers"],
    ["flowkit.synth"],  # sampling, vocoders, WAV: the training probe synthesises too
    ["flowkit.train"],
    # interop: F5-TTS checkpoints in and out; align: an aligner trained in a run folder, written into stores
    ["flowkit.report", "flowkit.interop", "flowkit.align"],
    # flowkit eval: synthesises, judges, renders in the report's style; curation judges a corpus, as pages too
    ["flowkit.evaluation", "flowkit.curation"],
    # sweeps launch `flowkit train` subprocesses and read run directories (report.rundir)
    ["flowkit.sweep"],
    ["flowkit.cli"],
    ["flowkit.__main__"],  # `python -m flowkit`
]
LAYER_OF = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _modules() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return module
    # never the bare "flowkit" for a submodule: a package missing from LAYERS must fail
    for n in range(len(parts), 1, -1):
        if ".".join(parts[:n]) in LAYER_OF:
            return ".".join(parts[:n])
    return ".".join(parts[:2])


def _is_module(name: str) -> bool:
    rel = PACKAGE.parent / name.replace(".", "/")
    return name.startswith("flowkit") and (rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file())


def _imports(module: str) -> list[tuple[str, int]]:
    """Every flowkit module ``module`` imports, with the line (relative imports resolved)."""
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not path.is_file():
        path = PACKAGE.parent / module.replace(".", "/") / "__init__.py"
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            for alias in node.names:  # `from flowkit import registry` imports flowkit.registry
                full = f"{base}.{alias.name}"
                is_module = _is_module(full)
                out.append((full if is_module else base, node.lineno))
    return [(name, line) for name, line in out if name == "flowkit" or name.startswith("flowkit.")]


def test_every_unit_has_a_layer() -> None:
    units = {_unit(m) for m in _modules()}
    assert units <= set(LAYER_OF), f"add to LAYERS: {sorted(units - set(LAYER_OF))}"


@pytest.mark.parametrize("module", _modules())
def test_module_imports_and_points_down(module: str) -> None:
    importlib.import_module(module)
    unit, layer = _unit(module), LAYER_OF[_unit(module)]
    upward = [
        f"{module}:{line} imports {name} (layer {LAYER_OF[_unit(name)]} >= {layer})"
        for name, line in _imports(module)
        if _unit(name) != unit and LAYER_OF[_unit(name)] >= layer
    ]
    assert not upward, "; ".join(upward)


def test_nothing_in_flowkit_imports_the_cli() -> None:
    users = [
        f"{module}:{line}"
        for module in _modules()
        if _unit(module) not in ("flowkit.cli", "flowkit.__main__")
        for name, line in _imports(module)
        if _unit(name) == "flowkit.cli"
    ]
    assert users == []


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The rule itself can fail: a lower unit naming a higher one is caught."""
    assert LAYER_OF[_unit("flowkit.train.run")] > LAYER_OF[_unit("flowkit.data.prepare")]
    assert LAYER_OF["flowkit.cli"] == len(LAYERS) - 2  # only `python -m flowkit` above it
    # flowkit.console is a low layer that data, loggers and train may use
    assert LAYER_OF[_unit("flowkit.console")] < LAYER_OF[_unit("flowkit.data.prepare")]
