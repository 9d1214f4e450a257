"""Measure a reading path: the flowkit modules a report's samples, or a training step, pass through.

python tools/trace_path.py                  # trains a 2-step debug run on the demo store first
python tools/trace_path.py --run RUN_DIR    # an existing run (a checkpoint to sample from)
python tools/trace_path.py --depth 3 --path # look one module further; print the path
python tools/trace_path.py --step --path    # the step path: `flowkit train` to the first optimizer.step()

The step path (``--step``): `flowkit.train.run.train` of a 1-step `gin/debug.gin` run on the
bundled demo store, traced as below, cut at the first call of the optimizer's ``step``; its
rooms are the files a reader opens following the code from the command to the update.

What is counted (following run_dir from report/samples.py:sample_blocks):
`flowkit.report.samples.sample_blocks` runs under `sys.settrace`, and every call of a
function defined in a flowkit source file is a step of the path, in the order the calls
start (pre-order of the call tree). A reader reads a call once, so a call site is followed
the first time only (its repeats, such as a loop over samples or ODE steps, are not
followed again), and the path goes at most ``--depth`` module boundaries below
``sample_blocks`` (default 2: what one reads following the code, not the model's insides).

- room: a module (``flowkit.synth.inference``);
- stay: a maximal run of consecutive steps in one room;
- climb: a stay in a higher layer than the stay before it (the layer table of
  ``tests/core/test_layers.py``): the reader had gone down and must come back up;
- return: a stay in a room already left earlier.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "flowkit"
LAYERS_FILE = REPO / "tests" / "core" / "test_layers.py"
DEFAULT_DEPTH = 2
WARM_MODULES = ("matplotlib.pyplot", "flowkit.report.plots", "flowkit.synth.inference", "flowkit.synth.sample",
                "flowkit.synth.vocoders", "flowkit.synth.level", "flowkit.data.dataset", "flowkit.model.dit",
                "soundfile")
TRANSPARENT = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})


def _layer_table() -> Callable[[str], int]:
    """``module -> layer index`` from the layer test's table (bottom = 0)."""
    spec = importlib.util.spec_from_file_location("_flowkit_layers", LAYERS_FILE)
    layers = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(layers)
    return lambda module: layers.LAYER_OF[layers._unit(module)]


def _module_of(filename: str, cache: dict[str, str | None]) -> str | None:
    """``flowkit.x.y`` for a source file inside flowkit/, else None."""
    if filename not in cache:
        try:
            rel = Path(filename).resolve().relative_to(PACKAGE.parent)
        except ValueError:
            cache[filename] = None
        else:
            parts = rel.with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            cache[filename] = name if name.startswith("flowkit") and filename.endswith(".py") else None
    return cache[filename]


@attrs.frozen
class Step:
    """One followed call: the module and function, and module boundaries below the root."""

    module: str
    function: str
    depth: int


@attrs.frozen
class PathCounts:
    """The counts of a path (see the module docstring)."""

    steps: int
    stays: int
    rooms: int
    climbs: int
    returns: int
    stay_list: tuple[tuple[str, int], ...]  # (module, layer) per stay

    def summary(self) -> str:
        return (f"{self.stays} stays in {self.rooms} rooms, {self.climbs} climbs back up, "
                f"{self.returns} returns to a room already left ({self.steps} calls followed)")


def trace_calls(fn: Callable[..., Any], *args: Any, depth: int = DEFAULT_DEPTH, stop_at: tuple[str, ...] = (),
                **kwargs: Any) -> tuple[Any, list[Step]]:
    """Run ``fn(*args, **kwargs)`` under `sys.settrace`; its result and the followed calls.

    Only this thread is traced; frames of non-flowkit code are passed through (a flowkit
    function called from torch, say, counts as called by the flowkit frame below it). A
    root outside flowkit makes each flowkit function it calls a root (depth 0). Only
    flowkit frames are traced further (their returns, no line events), which keeps the
    cost to about one Python call per function call. ``stop_at`` (``"path/file.py:function"``,
    any package; several allowed): the steps are cut at the first call of one of them.
    """
    cache: dict[str, str | None] = {}
    cut: list[int] = []
    seen: set[tuple[Any, int, Any]] = set()
    steps: list[Step] = []
    live: dict[Any, tuple[str, int, bool]] = {}  # a running flowkit frame -> (module, depth, followed)

    def on_return(frame: Any, event: str, arg: Any) -> Any:
        if event == "return":
            live.pop(frame, None)
        return on_return

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        if event != "call":
            return None
        module = _module_of(frame.f_code.co_filename, cache)
        if module is None:
            if (stop_at and not cut and f"{frame.f_code.co_filename}:{frame.f_code.co_name}".endswith(stop_at)):
                cut.append(len(steps))
            return None
        name = frame.f_code.co_name
        caller = frame.f_back
        while caller is not None and caller not in live:
            caller = caller.f_back
        if caller is None:  # the root call, or (a root outside flowkit) a call it makes
            back = frame.f_back
            key = (back.f_code if back else None, back.f_lineno if back else 0, frame.f_code)
            entry = (module, 0, key not in seen)
            seen.add(key)
            if entry[2]:
                steps.append(Step(module, name, 0))
        else:
            pmodule, pdepth, pfollowed = live[caller]
            if name in TRANSPARENT:  # a comprehension is its caller's body, not a call
                entry = (module, pdepth, pfollowed)
            else:
                d = pdepth + (module != pmodule)
                followed = False
                if pfollowed and d <= depth and name not in ("<module>", "__del__"):
                    # an import runs once per process and a finaliser when the collector
                    # says: neither is the path; a call site is followed the first time only
                    key = (caller.f_code, caller.f_lineno, frame.f_code)
                    followed = key not in seen
                    if followed:
                        seen.add(key)
                        steps.append(Step(module, name, d))
                entry = (module, d, followed)
        live[frame] = entry
        frame.f_trace_lines = False
        return on_return

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.settrace(previous)
    return result, steps[:cut[0]] if cut else steps


def count(steps: list[Step], layer_of: Callable[[str], int] | None = None) -> PathCounts:
    """Stays, rooms, climbs and returns of ``steps``."""
    layer_of = layer_of or _layer_table()
    stays: list[str] = []
    for step in steps:
        if not stays or stays[-1] != step.module:
            stays.append(step.module)
    climbs = sum(layer_of(b) > layer_of(a) for a, b in zip(stays, stays[1:], strict=False))
    returns = sum(1 for k, room in enumerate(stays) if room in stays[:k])
    return PathCounts(steps=len(steps), stays=len(stays), rooms=len(set(stays)), climbs=climbs, returns=returns,
                      stay_list=tuple((room, layer_of(room)) for room in stays))


def render_path(steps: list[Step], layer_of: Callable[[str], int] | None = None) -> str:
    """One line per stay: layer, module, and the functions called there."""
    layer_of = layer_of or _layer_table()
    lines: list[str] = []
    current, functions, last_layer = None, [], None
    for step in [*steps, None]:
        if step is None or step.module != current:
            if current is not None:
                layer = layer_of(current)
                mark = "^" if last_layer is not None and layer > last_layer else " "
                lines.append(f"{mark} L{layer:<2d} {current}: {', '.join(dict.fromkeys(functions))}")
                last_layer = layer
            if step is None:
                break
            current, functions = step.module, []
        functions.append(step.function)
    return "\n".join(lines)


def tiny_run(out: Path) -> Path:
    """A 2-step `gin/debug.gin` run on the bundled demo store in ``out`` (about 6 s on a CPU)."""
    import gin

    from flowkit.train.run import train

    try:
        train([REPO / "gin" / "debug.gin"], ["Trainer.loggers = []"], out=out, steps=2, device="cpu")
    finally:
        gin.clear_config()
    return out


def trace_samples(run_dir: Path, *, depth: int = DEFAULT_DEPTH, n: int = 1,
                  steps: int = 2) -> tuple[list[Any], list[Step]]:
    """`sample_blocks` of ``run_dir`` traced (``n`` samples, ``steps`` solver steps)."""
    import importlib

    from flowkit import registry
    from flowkit.report.samples import sample_blocks

    # Imports and plugin discovery happen once per process, so they are done before the
    # trace (a fresh process and a test session then count the same path; tracing an import
    # of matplotlib or torch's modules would also take most of the time).
    for name in WARM_MODULES:
        importlib.import_module(name)
    registry.load_plugins()
    return trace_calls(sample_blocks, Path(run_dir), n, steps=steps, depth=depth)


def trace_step(out: Path, *, depth: int = DEFAULT_DEPTH) -> list[Step]:
    """`flowkit.train.run.train` of a 1-step `gin/debug.gin` run in ``out``, traced up to the
    first ``torch.optim`` ``step`` (the update)."""
    import importlib

    import gin

    from flowkit import registry
    from flowkit.train.run import train

    for name in WARM_MODULES:
        importlib.import_module(name)
    registry.load_plugins()
    try:
        _, steps = trace_calls(train, [REPO / "gin" / "debug.gin"], ["Trainer.loggers = []"], out=out, steps=1,
                               device="cpu", depth=depth,
                               stop_at=("torch/optim/adamw.py:step", "torch/optim/adam.py:step"))
    finally:
        gin.clear_config()
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a run directory with a checkpoint (default: train a 2-step one)")
    parser.add_argument("--depth", type=int, default=DEFAULT_DEPTH,
                        help="module boundaries followed below sample_blocks")
    parser.add_argument("--samples", type=int, default=2, help="samples to synthesise (repeats are not followed)")
    parser.add_argument("--path", action="store_true", help="print the path, one line per stay (^ = a climb)")
    parser.add_argument("--step", action="store_true",
                        help="the step path instead: flowkit train to the first optimizer.step()")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.step:
            steps = trace_step(Path(tmp) / "run", depth=args.depth)
        else:
            run = args.run or tiny_run(Path(tmp) / "run")
            _, steps = trace_samples(run, depth=args.depth, n=args.samples)
    layer_of = _layer_table()
    if args.path:
        print(render_path(steps, layer_of))
    print(count(steps, layer_of).summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
