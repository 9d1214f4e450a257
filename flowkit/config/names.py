"""The names gin knows: a configurable as experiment files write it (``kind.name``), every
known name, a configurable's parameters, and "did you mean" among them.
"""

from __future__ import annotations

from collections.abc import Iterable

import gin

from flowkit import entry_points, registry

__all__ = ["display_name", "known_configurables", "parameters_of", "suggest"]


def display_name(configurable: object) -> str:
    """``kind.name`` for a registered component, the bare name for other configurables."""
    module = getattr(configurable, "module", None) or ""
    name = configurable.name  # type: ignore[attr-defined]
    return f"{module}.{name}" if module in entry_points.declared_kinds() else name


def known_configurables() -> list[str]:
    # gin 0.5 has no public listing of its registry
    return sorted({display_name(c) for _, c in gin.config._REGISTRY.items()})


def parameters_of(selector: str) -> list[str]:
    """Parameter names of the configurable ``selector`` (component or entry point); [] if unknown."""
    try:
        configurable = gin.config._REGISTRY.get_match(selector)
    except (KeyError, ValueError):
        return []
    if configurable is None:
        return []
    return [name for name, _, _ in registry.parameters_of(configurable.wrapped)]


def suggest(word: str, pool: Iterable[str]) -> str:
    near = entry_points.closest(word, list(pool))
    return f"did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
