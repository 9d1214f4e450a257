"""Where the last parse bound a value: its sources (files as parsed, then ``-b`` bindings)
and `where_bound`, which names the file and line (or the binding) of a key."""

from __future__ import annotations

import re
from collections.abc import Sequence

import gin

__all__ = ["remember_sources", "where_bound"]

#: ``(name, text)`` of every source of the last `parse` (files as parsed, with their include
#: lines blanked so line numbers hold, then ``-b/--binding #i``), for `where_bound`.
_LAST_SOURCES: list[tuple[str, str]] = []
_STATEMENT = re.compile(r"^(?P<key>(?:[\w.]+/)*[\w.]+)\s*=")
_KEY = re.compile(r"^(?P<scope>(?:[\w.]+/)*)(?:(?P<selector>[\w.]+)\.)?(?P<param>\w+)$")


def remember_sources(sources: Sequence[tuple[str, str]]) -> None:
    """Keep ``(name, text)`` of every source of a parse, in parse order, for `where_bound`."""
    _LAST_SOURCES[:] = list(sources)


def _same_target(a: str, b: str) -> bool:
    """Whether binding keys ``a`` and ``b`` (``[scope/]selector.param`` or a macro name)
    name the same parameter of the same configurable (gin accepts shortened names)."""
    ma, mb = _KEY.match(a), _KEY.match(b)
    if ma is None or mb is None or ma.group("scope") != mb.group("scope") or ma.group("param") != mb.group("param"):
        return False
    sa, sb = ma.group("selector"), mb.group("selector")
    if sa is None or sb is None:
        return sa == sb
    if sa == sb:
        return True
    try:
        ca, cb = gin.config._REGISTRY.get_match(sa), gin.config._REGISTRY.get_match(sb)
    except (KeyError, ValueError):
        return False
    return ca is not None and ca is cb


def where_bound(key: str) -> str | None:
    """Where the last `parse` bound ``key`` (``Trainer.lr``, ``model.dit.depth``, a macro
    name): ``path:line`` of the last statement binding it, ``-b "..."`` for a command-line
    binding, or None when no source binds it (a code default)."""
    found = None
    for name, text in _LAST_SOURCES:
        for lineno, line in enumerate(text.splitlines(), start=1):
            m = _STATEMENT.match(line.strip())
            if m and _same_target(m.group("key"), key):
                found = f'-b "{text.strip()}"' if name.startswith("-b") else f"{name}:{lineno}"
    return found
