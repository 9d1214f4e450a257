"""Measure the sample path: the flowkit modules a report's samples pass through, in order.

python tools/trace_path.py                  # trains a 2-step debug run on the demo store first
python tools/trace_path.py --run RUN_DIR    # an existing run (a checkpoint to sample from)
python tools/trace_path.py --depth 3 --path # look one module further; print the path

What is counted (issue 28: "following run_dir from report/samples.py:sample_blocks"):
`flowkit.report.samples.sample_blocks` runs under `sys.setprofile`, and every call of a
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


def trace_calls(fn: Callable[..., Any], *args: Any, depth: int = DEFAULT_DEPTH, **kwargs: Any) -> tuple[Any, list[Step]]:
    """Run ``fn(*args, **kwargs)`` under `sys.setprofile`; its result and the followed calls.

    Only this thread is traced; calls in non-flowkit code are passed through (a flowkit
    function called from torch, say, counts as called by the flowkit frame below it).
    """
    cache: dict[str, str | None] = {}
    seen: set[tuple[Any, int, Any]] = set()
    steps: list[Step] = []
    # one entry per live Python frame: (frame, module or None, depth, followed)
    stack: list[tuple[Any, str | None, int, bool]] = []
    root_code = getattr(fn, "__code__", None)

    def owner() -> tuple[Any, str | None, int, bool] | None:
        for entry in reversed(stack):
            if entry[1] is not None:
                return entry
        return None

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            module = _module_of(frame.f_code.co_filename, cache)
            if module is None:
                stack.append((frame, None, 0, bool(stack) and stack[-1][3]))
                return
            parent = owner()
            if parent is None:  # the root call
                followed = root_code is None or frame.f_code is root_code
                stack.append((frame, module, 0, followed))
                if followed:
                    steps.append(Step(module, frame.f_code.co_name, 0))
                return
            pframe, pmodule, pdepth, pfollowed = parent
            name = frame.f_code.co_name
            if name in TRANSPARENT:  # a comprehension is its caller's body, not a call
                stack.append((frame, module, pdepth, pfollowed))
                return
            d = pdepth + (module != pmodule)
            key = (pframe.f_code, pframe.f_lineno, frame.f_code)
            # an import runs once per process: what it executes is not the path
            followed = pfollowed and d <= depth and key not in seen and name != "<module>"
            if followed:
                seen.add(key)
                steps.append(Step(module, name, d))
            stack.append((frame, module, d, followed))
        elif event == "return":
            while stack:  # an exception may unwind several frames before their returns
                if stack.pop()[0] is frame:
                    break

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = fn(*args, **kwargs)
    finally:
        sys.setprofile(previous)
    return result, steps


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


def trace_samples(run_dir: Path, *, depth: int = DEFAULT_DEPTH, n: int = 1, steps: int = 2) -> tuple[list[Any], list[Step]]:
    """`sample_blocks` of ``run_dir`` traced (``n`` samples, ``steps`` solver steps)."""
    from flowkit.report.samples import sample_blocks

    return trace_calls(sample_blocks, Path(run_dir), n, steps=steps, depth=depth)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a run directory with a checkpoint (default: train a 2-step one)")
    parser.add_argument("--depth", type=int, default=DEFAULT_DEPTH, help="module boundaries followed below sample_blocks")
    parser.add_argument("--samples", type=int, default=2, help="samples to synthesise (repeats are not followed)")
    parser.add_argument("--path", action="store_true", help="print the path, one line per stay (^ = a climb)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run or tiny_run(Path(tmp) / "run")
        _, steps = trace_samples(run, depth=args.depth, n=args.samples)
    layer_of = _layer_table()
    if args.path:
        print(render_path(steps, layer_of))
    print(count(steps, layer_of).summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
