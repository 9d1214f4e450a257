"""`parse`: plugins first, files in include order, then the ``-b`` bindings, each error one
line; and the bindings in force as gin text (`config_text`)."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence
from pathlib import Path

import attrs
import gin

from flowkit import registry
from flowkit.config.checks import check_macros, check_required, check_types
from flowkit.config.files import expand_includes, resolve_config_file
from flowkit.config.messages import explain
from flowkit.config.names import display_name
from flowkit.config.sources import remember_sources
from flowkit.config.trust import check_statements
from flowkit.errors import ConfigError, FlowkitError

__all__ = ["ParsedConfig", "config_text", "parse", "parse_bindings"]


@attrs.frozen
class ParsedConfig:
    """What a parse read: the files in include order with their exact text, and the bindings."""

    files: tuple[Path, ...]
    sources: tuple[tuple[str, str], ...]  # (resolved path, text) of every file, include order
    bindings: tuple[str, ...]

    @property
    def text(self) -> str:
        """The resolved config (every binding in force) as gin text."""
        return config_text()


def _parse_text(text: str, name: str) -> None:
    stream = io.StringIO(text)
    stream.name = name  # gin reports errors against this name
    gin.parse_config(stream)


def parse(
    files: Sequence[str | Path] = (),
    bindings: Sequence[str] = (),
    *,
    finalize: bool = False,
    clear: bool = True,
) -> ParsedConfig:
    """Parse gin ``files`` (with their includes) and then ``bindings``.

    Args:
        files: experiment files; a bare name is looked up in the search path.
        bindings: gin statements such as ``"Trainer.steps = 100"``, applied last.
        finalize: lock the config afterwards (later bindings are then an error).
        clear: start from an empty config (the default; gin is global state).

    Returns:
        The files read, their exact text in include order, and the bindings.

    Raises:
        ConfigError: a missing file, a gin syntax error, an unknown component or
            parameter, a value of the wrong type, a locked config, or an ``import`` of a
            module no installed plugin declares (refused before any statement runs:
            `flowkit.config.trust`) — one line each.
        RegistryError: a plugin could not be loaded.
    """
    registry.load_plugins()
    if clear:
        gin.clear_config()
    order: list[tuple[Path, str, str]] = []
    resolved = [resolve_config_file(f) for f in files]
    read_by: dict[Path, int] = {}  # file -> the command-line file whose expansion read it
    for k, path in enumerate(resolved):
        if path in read_by:
            first = read_by[path]
            if resolved[first] == path:
                raise ConfigError(
                    f"{files[k]} is given twice; each gin file applies once, where it is first read, so the "
                    "repeat would change nothing (later files override earlier ones): give it once, in the "
                    "place whose values should win"
                )
            raise ConfigError(
                f"{files[k]} is already included by {files[first]}; each gin file applies once, where it is "
                f"first read, so giving it again would change nothing: drop it, or give it before {files[first]}"
            )
        expand_includes(path, order, ())
        for done, _, _ in order:
            read_by.setdefault(done, k)
    sources = [(expanded, str(path)) for path, _, expanded in order]
    sources += [(b + "\n", f"-b/--binding #{i}") for i, b in enumerate(bindings, start=1)]
    remember_sources([(name, text) for text, name in sources])
    for text, name in sources:  # every import and include checked before gin runs any statement
        check_statements(text, name)
    for text, name in sources:
        try:
            _parse_text(text, name)
        except FlowkitError:
            raise
        except (ValueError, SyntaxError, tokenize.TokenError, RuntimeError, KeyError, TypeError, ImportError,
                RecursionError) as exc:
            raise ConfigError(explain(exc, name, text)) from exc
    check_required()
    check_macros()
    if resolved and not any(_BINDS.search(text) for _, _, text in order):
        raise ConfigError(
            f"{resolved[0]} binds nothing: every value would be a code default and no data would be named; "
            "start from an experiment file (include 'base.gin') or a preset such as gin/quickstart.gin"
        )
    check_types()
    if finalize:
        gin.finalize()
    return ParsedConfig(
        files=tuple(resolved),
        sources=tuple((str(path), text) for path, text, _ in order),
        bindings=tuple(bindings),
    )


#: A gin statement that binds a value (``selector.param = ...`` or ``MACRO = ...``).
_BINDS = re.compile(r"^\s*[\w./]+\s*=", re.MULTILINE)


def parse_bindings(bindings: Sequence[str]) -> ParsedConfig:
    """Parse command-line bindings alone (e.g. for ``flowkit prepare -b ...``)."""
    return parse((), bindings)


_BINDING_LINE = re.compile(r"^(?P<scope>(?:[\w.]+/)*)(?P<selector>[\w.]+)\.(?P<param>\w+)(?P<rest> = .*)$")


def config_text() -> str:
    """Every binding in force, as gin text (what a run saves as ``config.gin``).

    Components are written with their full ``kind.name`` (gin itself shortens them to the
    shortest unambiguous name), so the text reads like the experiment files.
    """
    lines = []
    for line in gin.config_str().splitlines():
        m = _BINDING_LINE.match(line)
        if m:
            try:
                configurable = gin.config._REGISTRY.get_match(m.group("selector"))
            except (KeyError, ValueError):
                configurable = None
            if configurable is not None:
                line = f"{m.group('scope')}{display_name(configurable)}.{m.group('param')}{m.group('rest')}"
        elif line.startswith(("# Parameters for ", "# =====")):
            continue
        lines.append(line)
    return "\n".join(lines).strip() + "\n"
