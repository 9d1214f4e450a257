"""Two configs compared binding by binding, split by an allow-list (what resume may change)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

import attrs

__all__ = ["ConfigDiff", "config_diff"]


@attrs.frozen
class ConfigDiff:
    """Bindings that differ between two configs, split by an allow-list."""

    allowed: dict[str, tuple[str | None, str | None]]
    refused: dict[str, tuple[str | None, str | None]]

    @property
    def ok(self) -> bool:
        return not self.refused

    def describe(self) -> str:
        """The refused changes on one line, e.g. ``Trainer.lr: 0.001 -> 0.002``."""
        return "; ".join(f"{k}: {a} -> {b}" for k, (a, b) in sorted(self.refused.items()))


def _bindings_of(text: str) -> dict[str, str]:
    """``{selector.param: value}`` of a gin text as written by `config_text`.

    A statement runs until its brackets close (gin wraps long values over several lines);
    values are compared without layout (whitespace and trailing commas removed).
    """
    out: dict[str, str] = {}
    statement: list[str] = []
    depth = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not statement and (not line or line.startswith("#")):
            continue
        statement.append(line)
        depth += sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
        if depth > 0:
            continue
        key, sep, value = " ".join(statement).partition("=")
        statement, depth = [], 0
        if sep:
            value = re.sub(r"\s+", "", value)
            out[key.strip()] = re.sub(r",([\]\)}])", r"\1", value)
    return out


def config_diff(old_text: str, new_text: str, allow: Iterable[str] = ()) -> ConfigDiff:
    """Compare two gin texts binding by binding.

    Args:
        old_text, new_text: configs as written by `config_text` (e.g. a run's ``config.gin``).
        allow: fnmatch patterns of binding keys that may change (``"Trainer.log_every"``,
            ``"logger.*"``).

    Returns:
        A `ConfigDiff`; a binding missing on one side shows ``None`` there.
    """
    old, new = _bindings_of(old_text), _bindings_of(new_text)
    patterns = list(allow)
    allowed: dict[str, tuple[str | None, str | None]] = {}
    refused: dict[str, tuple[str | None, str | None]] = {}
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        target = allowed if any(fnmatch.fnmatchcase(key, p) for p in patterns) else refused
        target[key] = (a, b)
    return ConfigDiff(allowed, refused)
