"""gin's errors as one line: where (file and line, or the ``-b`` binding), what, and the fix;
a misspelled component or parameter gets the closest registered names."""

from __future__ import annotations

import os
import re
import tokenize
from pathlib import Path

from flowkit import entry_points
from flowkit.config.names import known_configurables, parameters_of, suggest
from flowkit.config.sources import where_bound
from flowkit.errors import ConfigError

__all__ = ["explain", "one_line"]

_LOCATION = re.compile(r'In file "(?P<file>[^"]+)", line (?P<line>\d+)|In bindings string line (?P<bline>\d+)')


def explain(exc: BaseException, source: str = "", source_text: str = "") -> str:
    """One line for a gin error in ``source``: where, what, and the fix."""
    text = str(exc)
    lines = text.splitlines()
    where = source
    offending = ""
    for i, line in enumerate(lines):
        m = _LOCATION.search(line)
        if m:
            if m.group("file"):
                where = f"{m.group('file')}:{m.group('line')}"
            elif source.startswith("-b"):
                where = source
            else:
                where = f"{source}:{m.group('bline')}"
            if i + 1 < len(lines):
                offending = lines[i + 1].strip()
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}:{exc.lineno}"
        offending = (exc.text or "").strip()
        head = f"gin syntax error: {exc.msg}"
    elif isinstance(exc, tokenize.TokenError):
        head = f"gin syntax error: {exc.args[0]} (an unclosed bracket or quote?)"
        # tokenize reports where the input ended; the culprit is the last statement begun
        stripped = [(i, ln) for i, ln in enumerate(source_text.splitlines(), 1) if ln.strip()]
        starts = [(i, ln) for i, ln in stripped if not ln[0].isspace()]
        if starts:
            where = f"{source}:{starts[-1][0]}"
            offending = starts[-1][1].strip()
    elif isinstance(exc, ImportError):
        head = f"gin import of {exc.name or 'a module'!r} failed ({lines[0] if lines else type(exc).__name__})"
    elif isinstance(exc, RecursionError):
        head = "a value nested deeper than gin can read (lists or brackets inside one another, hundreds deep)"
    else:
        head = lines[0] if lines else type(exc).__name__
    fix = ""
    if isinstance(exc, ImportError):
        fix = "install the package that provides it, or remove the import line (flowkit plugins load without one)"
    if isinstance(exc, RecursionError):
        fix = "write the value flat"
    if "malformed node or string" in head:  # a bare word where a value belongs (e.g. nan, inf, yes)
        head = "gin syntax error: not a gin value"
        fix = ("a value is a number, a quoted string, True/False/None, a list, tuple or dict of values, "
               "@kind.name() or %MACRO (gin has no nan or inf)")
    m = re.search(r"No configurable matching (?:reference )?'@?([\w.]+)(?:\(\))?'", head)
    if m:
        name = m.group(1)
        pool = known_configurables()
        kind = name.split(".")[0]
        if "." in name and kind in entry_points.declared_kinds():
            pool = [p for p in pool if p.startswith(kind + ".")]  # a misspelled name, not kind
        listing = f"flowkit plugins {kind}" if kind in entry_points.declared_kinds() else "flowkit plugins"
        fix = suggest(name, pool) or f"see `{listing}` for the registered names"
        head = f"unknown component or configurable {name!r}"
    m = re.search(r"Configurable '([\w.]+)' doesn't have a parameter named '(\w+)'", head)
    if m:
        selector, param = m.group(1), m.group(2)
        params = parameters_of(selector)
        fix = suggest(param, params) or (f"its parameters are: {', '.join(params)}" if params else "")
        head = f"{selector} has no parameter {param!r}"
    if "locked Gin config" in head:
        head = "the config is locked (training has started)"
        fix = "pass bindings with -b before the run starts, or change the gin file"
    if not _echoable(where):  # a config linked to a file that is no gin file: none of its text is echoed
        head, offending = "not a gin file (a config is read from .gin files only)", ""
        fix = "give the .gin file itself"
    parts = [p for p in (where, head) if p]
    msg = ": ".join(parts)
    if offending:
        msg += f" -- `{offending}`"
    if fix:
        msg += f"; {fix}"
    return msg


def _echoable(where: str) -> bool:
    """Whether the line of ``where`` (``FILE:LINE`` or a ``-b`` binding) may be quoted: a
    binding, or a file whose real path is a .gin file."""
    if not where or where.startswith("-b"):
        return True
    name = where.rsplit(":", 1)[0] if re.search(r":\d+$", where) else where
    return Path(os.path.realpath(name)).suffix == ".gin"


_LEADING_KEY = re.compile(r"^(?P<key>(?:[\w.]+/)*[\w.]+\.\w+)\s*=")


def one_line(exc: BaseException) -> str:
    """A one-line rendering of an error that gin may have augmented with location lines.

    A `ConfigError` (or an error gin raised building a configurable) that opens with a
    binding (``Trainer.lr = -1.0 must be > 0``) and names no place gets the file and line
    of that binding in the last parse (`where_bound`) in front."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    head = lines[0]
    m = _LEADING_KEY.match(head)
    if m and (isinstance(exc, ConfigError) or len(lines) > 1):
        where = where_bound(m.group("key"))
        if where:
            head = f"{where}: {head}"
    calls = [ln for ln in lines[1:] if ln.startswith("In call to configurable")]
    if calls:
        m = re.search(r"'([^']+)'", calls[-1])
        if m:
            head += f" (building {m.group(1)})"
    return head
