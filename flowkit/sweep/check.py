"""Every point's config parsed and built before any run starts, as ``flowkit config`` does.

`check_points` parses the sweep's files with each point's bindings (`flowkit.config.parse`)
and builds the `Trainer` entry point, which builds every component: a binding that
``flowkit train`` would refuse (an unknown configurable or parameter, a value of the
wrong type, a reference to an unregistered component, a value a component rejects) is
refused here, for the first point that has it, in one line that names the ``--grid`` or
``-b`` option it came from. gin is global state: the config is cleared after each point,
and the sweep's runs are separate processes that parse their own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from flowkit.errors import ConfigError, FlowkitError
from flowkit.sweep.grid import Point

__all__ = ["check_points"]

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
                 data: Sequence[str | Path] = ()) -> None:
    """Parse and build the config of every point; return when all of them would train.

    Args:
        configs: the sweep's gin files, in order.
        base: the ``-b`` bindings every point shares (before the point's own).
        points: the points.
        data: the ``--data`` stores every point trains on (bound as ``flowkit train`` binds
            them, after the point's bindings).

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
    try:
        for point in points:
            bindings = [*base, *point.lines, *stores]
            try:
                gin_config.parse(configs, bindings)
                from flowkit.train.settings import Trainer

                Trainer()  # builds every component, as `flowkit config` does
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
    finally:
        gin.clear_config()
