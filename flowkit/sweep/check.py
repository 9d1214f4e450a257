"""Every point's config parsed and built before any run starts, as ``flowkit config`` does.

`check_points` parses the sweep's files with each point's bindings (`flowkit.config.parse`)
and builds the `Trainer` entry point, which builds every component: a binding that
``flowkit train`` would refuse (an unknown configurable or parameter, a value of the
wrong type, a reference to an unregistered component, a value a component rejects) is
refused here, for the first point that has it, in one line that names the ``--grid`` or
``-b`` option it came from. gin is global state: the config is cleared after each point,
and the sweep's runs are separate processes that parse their own.

A swept key that no point's build reads (a parameter of a component the experiment does
not use, a macro nothing references) is refused too: every point would train the same
model, and the sweep would name a "best" among identical runs. What a build read is gin's
operative config (every configurable called, with its scope, macros included).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from flowkit.errors import ConfigError, FlowkitError
from flowkit.sweep.grid import Point

__all__ = ["check_points"]

#: Components a run builds itself beside the ones Trainer's bindings name (flowkit.train.run).
_BUILT_BY_THE_RUN = frozenset({"logger.jsonl"})

_BINDING_NO = re.compile(r"-b/--binding #(\d+)(?::\d+)?")


def _origin(message: str, base: Sequence[str], point: Point) -> tuple[str, str]:
    """(where the offending binding came from, the message without gin's binding number)."""
    m = _BINDING_NO.search(message)
    if m is None:
        return "", message
    index = int(m.group(1)) - 1
    rest = (message[: m.start()] + message[m.end():]).lstrip(": ").strip()
    if index < len(base):
        return f"-b {base[index]!r}", rest
    if index - len(base) >= len(point.bindings):
        return "--data", rest
    key, value = point.bindings[index - len(base)]
    return f"--grid {key}: value {value}", rest


def _failing_binding(message: str, base: Sequence[str], point: Point) -> tuple[str, str]:
    """For an error raised while building (no binding number): the point binding it names."""
    for key, value in point.bindings:
        selector, _, param = key.rpartition(".")
        name = selector.rpartition("/")[2]
        if name and (f"{name}.{param}" in message or f"'{name}'" in message or value.strip() in message):
            return f"--grid {key}: value {value}", message
    return "", message


def check_points(configs: Sequence[str | Path], base: Sequence[str], points: Sequence[Point],
                 data: Sequence[str | Path] = (), *, needs_probe: bool = False) -> None:
    """Parse and build the config of every point; return when all of them would train.

    Args:
        configs: the sweep's gin files, in order.
        base: the ``-b`` bindings every point shares (before the point's own).
        points: the points.
        data: the ``--data`` stores every point trains on (bound as ``flowkit train`` binds
            them, after the point's bindings).
        needs_probe: the objective is the probe's (``--objective probe_wer``): a point
            without ``Trainer.probe`` is refused (it would log nothing to rank by).

    Raises:
        ConfigError: the first refused binding, e.g. ``--grid Trainer.lrr: value 1e-3:
            Trainer has no parameter 'lrr'; did you mean 'lr'?``, naming its point.
        DataError: a ``--data`` store that does not exist, or one given twice.
        RegistryError: a plugin failed to load (not the sweep's fault: as `flowkit config`).
    """
    import gin

    from flowkit import config as gin_config
    from flowkit.config import one_line
    from flowkit.train.run import option_bindings  # --data as train binds it

    stores = option_bindings([Path(d) for d in data], None)
    read: set[str] = set()  # swept keys some point's build read
    try:
        for point in points:
            bindings = [*base, *point.lines, *stores]
            no_probe = False
            try:
                gin_config.parse(configs, bindings)
                from flowkit.train.settings import Trainer

                settings = Trainer()  # builds every component, as `flowkit config` does
                read.update(key for key, _ in point.bindings if _was_read(key))
                no_probe = needs_probe and settings.probe is None
            except ConfigError as exc:
                where, rest = _origin(one_line(exc), base, point)
                if not where:
                    where, rest = _failing_binding(rest, base, point)
                raise ConfigError(f"{where}: {rest}" if where else rest) from None
            except FlowkitError:
                raise
            except (TypeError, ValueError) as exc:
                if "In call to configurable" not in str(exc):
                    raise
                where, rest = _failing_binding(one_line(exc), base, point)
                raise ConfigError(f"{where}: {rest}" if where else f"config: {rest}") from None
            finally:
                gin.clear_config()
            if no_probe:
                raise ConfigError(
                    "--objective probe_wer ranks the points by the intelligibility probe, but the experiment has "
                    f"none{' at ' + ', '.join(point.lines) if point.bindings else ''}: bind "
                    "-b 'Trainer.probe = @Probe()' (as gin/quickstart.gin does), or use --objective val_loss_ema")
    finally:
        gin.clear_config()
    for key in dict.fromkeys(key for point in points for key, _ in point.bindings):
        if key not in read:
            what = ("no binding references the macro" if "." not in key
                    else "no component the experiment builds reads it")
            raise ConfigError(
                f"--grid {key}: the experiment never uses it ({what}), so every point would train the same "
                "model; drop this --grid, or sweep a binding the experiment uses (`flowkit config` shows them)"
            )


def _was_read(key: str) -> bool:
    """Whether the last build read the binding ``key`` (``[scope/]selector.param`` or a macro),
    from gin's operative config; a selector gin does not know counts as read (the parse
    has already named it)."""
    import gin

    operative = gin.config._OPERATIVE_CONFIG
    scope, _, rest = key.rpartition("/")
    if "." not in rest:  # a macro: gin records it as the configurable 'gin.macro' in its name's scope
        return any(sel == "gin.macro" and sc.rpartition("/")[2] == rest for sc, sel in operative)
    selector = rest.rpartition(".")[0]
    try:
        configurable = gin.config._REGISTRY.get_match(selector)
    except (KeyError, ValueError):
        return True
    if configurable is None:
        return True
    if configurable.selector in _BUILT_BY_THE_RUN:
        return True
    return any(sel == configurable.selector and (not scope or scope in sc.split("/")) for sc, sel in operative)
