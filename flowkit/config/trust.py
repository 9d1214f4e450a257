"""A config is data: the statements of a gin text are read, without running any, before gin
parses it (`check_statements`).

gin executes two kinds of statement that reach outside the text: ``import module`` (gin
imports the module, running its code) and ``include 'path'`` (gin reads any file). flowkit
allows neither from an untrusted file:

- ``import M`` (or ``from P import M``) is accepted only when ``M`` is a module an installed
  distribution declares in its flowkit entry points (``flowkit.plugins``,
  ``flowkit.configurables``, ``flowkit.kinds``), or a package holding one. Those modules
  are installed code that `flowkit.registry.load_plugins` imports anyway; anything else
  would be code carried by a config. A plugin is the way to bring code (docs/plugins.md).
  gin's dynamic registration (``from __gin__ import dynamic_registration``), which makes
  any imported callable configurable, is refused the same way.
- ``include`` is expanded by flowkit itself (`flowkit.config.files.expand_includes`,
  ``.gin`` files only); an include statement written in a form flowkit does not expand
  would be read by gin from the working directory, so it is refused.

The scan uses gin's own parser with a delegate that builds nothing, so it reads exactly
the statements gin would run, in order; where the text has a syntax error, the statements
before it (all gin would run before failing) are checked and the parse itself then
reports the error.
"""

from __future__ import annotations

import io
from functools import lru_cache

from flowkit import entry_points
from flowkit.errors import ConfigError

__all__ = ["allowed_modules", "check_statements"]


@lru_cache(maxsize=1)
def allowed_modules() -> frozenset[str]:
    """Modules a gin ``import`` may name: every module an installed distribution declares
    in its flowkit entry points, and the packages that hold them (metadata only: nothing
    is imported)."""
    declared: set[str] = set()
    for group in (entry_points.ENTRY_POINT_GROUP, entry_points.CONFIGURABLE_GROUP, entry_points.KIND_GROUP):
        for _, value, _ in entry_points.entries(group):
            module = value.split(":")[0].strip()
            parts = module.split(".")
            declared.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return frozenset(declared)


class _NoValues:
    """A gin parser delegate that builds nothing: references and macros become None."""

    def configurable_reference(self, scoped_configurable_name: str, evaluate: bool) -> None:
        return None

    def macro(self, macro_name: str) -> None:
        return None


def check_statements(text: str, name: str) -> None:
    """Refuse the ``import`` and ``include`` statements of gin ``text`` (from ``name``, a file
    or ``-b/--binding #i``) that would run code or read a file (see the module docstring).

    Raises:
        ConfigError: ``name:line``, the statement, and the way to bring code (a plugin).
    """
    from gin import config_parser

    stream = io.StringIO(text)
    stream.name = name
    statements = []
    try:
        for statement in config_parser.ConfigParser(stream, _NoValues()):
            statements.append(statement)
    except Exception:  # a syntax error (or a nesting too deep): gin runs only the statements before it, then fails
        pass
    for statement in statements:
        if isinstance(statement, config_parser.ImportStatement):
            _check_import(statement, name)
        elif isinstance(statement, config_parser.IncludeStatement):
            raise ConfigError(
                f"{name}:{statement.location.line_num}: include {statement.filename!r} is not in the form flowkit "
                "expands; write it on its own line as include 'path/to/file.gin'"
            )


def _check_import(statement: object, name: str) -> None:
    module: str = statement.module  # type: ignore[attr-defined]
    line = statement.location.line_num  # type: ignore[attr-defined]
    if module.split(".")[0] == "__gin__":
        raise ConfigError(
            f"{name}:{line}: `{statement.format()}` is refused: gin's dynamic registration makes any "  # type: ignore[attr-defined]
            "imported function configurable, so the config would be code; flowkit configures registered "
            "components only: bring code as a plugin (docs/plugins.md) and remove the line"
        )
    if module in allowed_modules():
        return
    raise ConfigError(
        f"{name}:{line}: `{statement.format()}` is refused: a config is data, and a gin import runs a "  # type: ignore[attr-defined]
        f"module's code; {module!r} is not declared by an installed flowkit plugin. Bring code as a plugin "
        "(a package whose 'flowkit.plugins' entry points name its module, docs/plugins.md), then remove the "
        "import line (plugins load without one)"
    )
