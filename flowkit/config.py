"""gin glue: load experiment files and ``-b`` bindings, explain every error in one line.

`parse` is the one way flowkit reads a config:

1. every built-in component module and installed plugin is imported first
   (`flowkit.registry.load_plugins`), because gin only knows configurables that exist;
2. ``include 'x.gin'`` is resolved against the *including file's* directory first, then
   the working directory, ``./gin`` and the repository's ``gin/`` (gin itself resolves
   against the working directory only, gin-config #104), so an experiment includes its
   base file from wherever it is run;
3. files are parsed in include order, then the command-line bindings, which come last
   and so override the files; each file applies once, where it is first read, so a file
   given twice on the command line (or given after a file that already included it) is
   refused: its second mention would change nothing;
4. gin's errors become a `ConfigError` naming the file and line, the offending text and,
   for a misspelled component or parameter, the closest registered names; a required
   value left unset, an undefined macro, a value of the wrong type and (through
   `one_line`) a value a component refuses when it is built name the file and line of
   the binding (`where_bound`).

gin is global state: parse once per process (tests clear it between cases) and hand
worker processes the bindings explicitly (`ParsedConfig.sources` carries the exact text).
"""

from __future__ import annotations

import difflib
import fnmatch
import io
import re
import tokenize
import types
import typing
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import attrs
import gin

from flowkit import registry
from flowkit.errors import ConfigError, FlowkitError

__all__ = [
    "ConfigDiff",
    "ParsedConfig",
    "config_diff",
    "config_text",
    "one_line",
    "parse",
    "parse_bindings",
    "resolve_config_file",
    "search_path",
    "where_bound",
]

REPO_GIN = Path(__file__).resolve().parent.parent / "gin"
_INCLUDE = re.compile(r"""^\s*include\s+(['"])(?P<path>.+?)\1\s*(#.*)?$""")


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


def search_path(cwd: Path | None = None) -> list[Path]:
    """Directories searched for a config file or include not found relative to its includer."""
    cwd = Path.cwd() if cwd is None else cwd
    out = [cwd, cwd / "gin"]
    if REPO_GIN.is_dir():  # a clone: `gin/x.gin` and `x.gin` work from any directory
        out += [REPO_GIN.parent, REPO_GIN]
    return list(dict.fromkeys(out))


def resolve_config_file(name: str | Path, relative_to: Path | None = None) -> Path:
    """The config file ``name`` refers to.

    Raises:
        ConfigError: not found; the message lists where it was looked for and the closest
            existing file, written the way ``name`` was.
    """
    path = Path(name)
    if path.is_absolute():
        candidates = [path]
    else:
        roots = ([relative_to] if relative_to is not None else []) + search_path()
        candidates = list(dict.fromkeys(root / path for root in roots))  # ordered, unique
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    for candidate in candidates:
        if candidate.is_dir():
            inside = sorted(p.name for p in candidate.glob("*.gin"))[:3]
            hint = f", e.g. {candidate / inside[0]}" if inside else ""
            raise ConfigError(f"config file {str(name)!r} is a directory ({candidate}); give a .gin file{hint}")
    near: list[str] = []
    for candidate in candidates:
        if candidate.parent.is_dir():
            names = sorted(p.name for p in candidate.parent.glob("*.gin"))
            close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.7)
            near += [str(path.parent / n) if path.parent != Path(".") else n for n in close]
    hint = registry.did_you_mean(list(dict.fromkeys(near))[:3])
    where = ", ".join(dict.fromkeys(str(c.parent) for c in candidates if c.parent.is_dir())) or "nowhere that exists"
    raise ConfigError(f"config file {str(name)!r} not found{hint}; looked in: {where}")


def _read_gin(path: Path) -> str:
    """The text of gin file ``path``.

    Raises:
        ConfigError: the file is not UTF-8 text (a binary file, another encoding), naming
            the line of the first bad byte.
    """
    data = path.read_bytes()
    bad = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start
    else:
        if bad < 0:
            return text
    line = data[:bad].count(b"\n") + 1
    raise ConfigError(
        f"{path}:{line}: not a gin text file (byte {bad} is {data[bad:bad + 1]!r}, not UTF-8 text); "
        "give a gin file saved as UTF-8"
    )


def _expand(path: Path, order: list[tuple[Path, str, str]], stack: tuple[Path, ...]) -> None:
    """Depth-first include expansion: includes before the file that includes them.

    Appends ``(path, text as read, text with its include lines blanked)`` to ``order``.
    A file already in ``order`` is not read again: an overlay that includes base.gin,
    given after an experiment that included it too, does not reset the experiment's
    values (t5x-style layering: each file applies once, where it is first included).
    """
    if path in stack:
        chain = " -> ".join(str(p) for p in (*stack, path))
        raise ConfigError(f"include cycle: {chain}; remove one of the includes")
    if any(done == path for done, _, _ in order):
        return
    text = _read_gin(path)
    kept: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _INCLUDE.match(line)
        if m is None:
            kept.append(line)
            continue
        try:
            included = resolve_config_file(m.group("path"), relative_to=path.parent)
        except ConfigError as exc:
            raise ConfigError(f"{path}:{lineno}: {exc}") from None
        _expand(included, order, (*stack, path))
        kept.append("")  # keep line numbers of the rest of the file
    order.append((path, text, "\n".join(kept) + "\n"))


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
            parameter, a value of the wrong type, or a locked config — one line each.
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
        _expand(path, order, ())
        for done, _, _ in order:
            read_by.setdefault(done, k)
    sources = [(expanded, str(path)) for path, _, expanded in order]
    sources += [(b + "\n", f"-b/--binding #{i}") for i, b in enumerate(bindings, start=1)]
    _LAST_SOURCES[:] = [(name, text) for text, name in sources]
    for text, name in sources:
        try:
            _parse_text(text, name)
        except FlowkitError:
            raise
        except (ValueError, SyntaxError, tokenize.TokenError, RuntimeError, KeyError, TypeError, ImportError) as exc:
            raise ConfigError(_explain(exc, name, text)) from exc
    _check_required()
    _check_macros()
    if resolved and not any(_BINDS.search(text) for _, _, text in order):
        raise ConfigError(
            f"{resolved[0]} binds nothing: every value would be a code default and no data would be named; "
            "start from an experiment file (include 'base.gin') or a preset such as gin/quickstart.gin"
        )
    _check_types()
    if finalize:
        gin.finalize()
    return ParsedConfig(
        files=tuple(resolved),
        sources=tuple((str(path), text) for path, text, _ in order),
        bindings=tuple(bindings),
    )


#: A gin statement that binds a value (``selector.param = ...`` or ``MACRO = ...``).
_BINDS = re.compile(r"^\s*[\w./]+\s*=", re.MULTILINE)

#: The fix for a required macro left unset, by macro name (others: bind the macro).
REQUIRED_FIXES = {
    "DATA": "give --data STORE (repeatable; a store made by flowkit prepare) or bind DATA = ['path/to/store.zarr']",
}


def _required_name(value: object, seen: tuple[str, ...] = ()) -> str | None:
    """The macro whose value ``value`` resolves to ``%gin.REQUIRED`` (following macros), or None."""
    selector = getattr(value, "_selector", None)
    scopes = getattr(value, "_scopes", None) or []
    if selector == "gin.constant" and scopes == ["gin.REQUIRED"]:
        return seen[-1] if seen else "gin.REQUIRED"
    if selector == "gin.macro" and scopes and scopes[-1] not in seen:
        bound = gin.config._CONFIG.get((scopes[-1], "gin.macro"), {}).get("value")
        return _required_name(bound, (*seen, scopes[-1]))
    return None


def _check_required() -> None:
    """Refuse, at parse time, a binding whose value is still a required macro.

    Raises:
        ConfigError: naming the binding, the macro and its fix (`REQUIRED_FIXES`).
    """
    for (scope, selector), params in gin.config._CONFIG.items():
        if selector == "gin.macro":
            continue
        for param, value in params.items():
            macro = _required_name(value)
            if macro is None:
                continue
            name = _display_name(gin.config._REGISTRY.get_match(selector)) if gin.config._REGISTRY.get_match(selector) else selector
            full = f"{scope}/{name}" if scope else name
            where = where_bound(f"{full}.{param}")
            at = f"{where}: " if where else ""
            if macro == "gin.REQUIRED":  # bound to %gin.REQUIRED directly: the binding itself is the fix
                raise ConfigError(f"{at}{full}.{param} = %gin.REQUIRED is required and not set; "
                                  f"bind it, e.g. -b \"{full}.{param} = ...\"")
            fix = REQUIRED_FIXES.get(macro, f"bind it, e.g. -b \"{macro} = ...\"")
            raise ConfigError(f"{at}{full}.{param} = %{macro} is required and not set ({macro} = %gin.REQUIRED); {fix}")


def _macro_names(value: object) -> Iterator[str]:
    """The macros ``value`` refers to (``%NAME``), inside lists, tuples and dicts too."""
    if getattr(value, "_selector", None) == "gin.macro":
        scopes = getattr(value, "_scopes", None) or []
        if scopes:
            yield scopes[-1]
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _macro_names(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _macro_names(item)


def _check_macros() -> None:
    """Refuse, at parse time, a binding that uses a macro no file or binding defines
    (gin itself fails only when the value is built, with "macro() missing 1 required
    positional argument").

    Raises:
        ConfigError: naming the file and line of the binding, the macro, the closest
            defined macros, and how to define it.
    """
    config = gin.config._CONFIG
    defined = sorted(scope for (scope, selector), params in config.items()
                     if selector == "gin.macro" and "value" in params)
    for (scope, selector), params in config.items():
        for param, value in params.items():
            for macro in _macro_names(value):
                if (macro, "gin.macro") in config and "value" in config[(macro, "gin.macro")]:
                    continue
                if selector == "gin.macro":
                    full = scope
                    where = where_bound(scope)
                else:
                    configurable = gin.config._REGISTRY.get_match(selector)
                    name = _display_name(configurable) if configurable else selector
                    full = f"{scope}/{name}.{param}" if scope else f"{name}.{param}"
                    where = where_bound(full)
                near = _suggest(macro, defined)
                raise ConfigError(
                    f"{where + ': ' if where else ''}{full} = %{macro} uses macro {macro}, which is not defined"
                    f"{'; ' + near if near else ''}; define it ({macro} = ...) in a gin file or with "
                    f"-b \"{macro} = ...\""
                )


#: ``(name, text)`` of every source of the last `parse` (files as parsed, with their include
#: lines blanked so line numbers hold, then ``-b/--binding #i``), for `where_bound`.
_LAST_SOURCES: list[tuple[str, str]] = []
_STATEMENT = re.compile(r"^(?P<key>(?:[\w.]+/)*[\w.]+)\s*=")
_KEY = re.compile(r"^(?P<scope>(?:[\w.]+/)*)(?:(?P<selector>[\w.]+)\.)?(?P<param>\w+)$")


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
                line = f"{m.group('scope')}{_display_name(configurable)}.{m.group('param')}{m.group('rest')}"
        elif line.startswith(("# Parameters for ", "# =====")):
            continue
        lines.append(line)
    return "\n".join(lines).strip() + "\n"


# ---- error translation ----------------------------------------------------------------

_LOCATION = re.compile(r'In file "(?P<file>[^"]+)", line (?P<line>\d+)|In bindings string line (?P<bline>\d+)')


def _display_name(configurable: object) -> str:
    """``kind.name`` for a registered component, the bare name for other configurables."""
    module = getattr(configurable, "module", None) or ""
    name = configurable.name  # type: ignore[attr-defined]
    return f"{module}.{name}" if module in registry.declared_kinds() else name


def _known_configurables() -> list[str]:
    # gin 0.5 has no public listing of its registry
    return sorted({_display_name(c) for _, c in gin.config._REGISTRY.items()})


def _parameters_of(selector: str) -> list[str]:
    """Parameter names of the configurable ``selector`` (component or entry point); [] if unknown."""
    try:
        configurable = gin.config._REGISTRY.get_match(selector)
    except (KeyError, ValueError):
        return []
    if configurable is None:
        return []
    return [name for name, _, _ in registry.parameters_of(configurable.wrapped)]


def _suggest(word: str, pool: Iterable[str]) -> str:
    near = registry.closest(word, list(pool))
    return f"did you mean {' or '.join(repr(n) for n in near)}?" if near else ""


def _explain(exc: BaseException, source: str = "", source_text: str = "") -> str:
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
    else:
        head = lines[0] if lines else type(exc).__name__
    fix = ""
    if isinstance(exc, ImportError):
        fix = "install the package that provides it, or remove the import line (flowkit plugins load without one)"
    m = re.search(r"No configurable matching (?:reference )?'@?([\w.]+)(?:\(\))?'", head)
    if m:
        name = m.group(1)
        pool = _known_configurables()
        kind = name.split(".")[0]
        if "." in name and kind in registry.declared_kinds():
            pool = [p for p in pool if p.startswith(kind + ".")]  # a misspelled name, not kind
        fix = _suggest(name, pool) or f"see `flowkit plugins{' ' + kind if kind in registry.declared_kinds() else ''}` for the registered names"
        head = f"unknown component or configurable {name!r}"
    m = re.search(r"Configurable '([\w.]+)' doesn't have a parameter named '(\w+)'", head)
    if m:
        selector, param = m.group(1), m.group(2)
        params = _parameters_of(selector)
        fix = _suggest(param, params) or (f"its parameters are: {', '.join(params)}" if params else "")
        head = f"{selector} has no parameter {param!r}"
    if "locked Gin config" in head:
        head = "the config is locked (training has started)"
        fix = "pass bindings with -b before the run starts, or change the gin file"
    parts = [p for p in (where, head) if p]
    msg = ": ".join(parts)
    if offending:
        msg += f" -- `{offending}`"
    if fix:
        msg += f"; {fix}"
    return msg


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


# ---- parse-time type checks ----------------------------------------------------------


def _accepts(annotation: object, value: object) -> bool | None:
    """Whether ``value`` fits a simple annotation; None when the annotation is not checked."""
    if type(value).__name__ in ("ConfigurableReference", "MacroProxy", "_UnknownConfigurableReference"):
        return None  # references and macros are checked when they are built
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        verdicts = [_accepts(a, value) for a in typing.get_args(annotation)]
        if any(v is None for v in verdicts):
            return None
        return any(verdicts)
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if origin in (tuple, list, typing.Sequence) or annotation in (tuple, list):
        return isinstance(value, (tuple, list))
    return None


def _check_types() -> None:
    """Refuse a binding whose value cannot be the attrs field's declared type."""
    for (scope, selector), params in gin.config._CONFIG.items():
        try:
            configurable = gin.config._REGISTRY.get_match(selector)
        except (KeyError, ValueError):
            continue
        if configurable is None or not attrs.has(configurable.wrapped):
            continue
        cls = configurable.wrapped
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # unresolvable forward references: leave it to run time
            continue
        fields = {f.alias or f.name: f for f in attrs.fields(cls)}
        for param, value in params.items():
            field = fields.get(param)
            if field is None or field.name not in hints:
                continue
            if _accepts(hints[field.name], value) is False:
                name = _display_name(configurable)
                full = f"{scope}/{name}" if scope else name
                where = where_bound(f"{full}.{param}")
                raise ConfigError(
                    f"{where + ': ' if where else ''}{full}.{param} = {value!r}: expected "
                    f"{registry.type_name(hints[field.name])}, got {type(value).__name__}; fix the value "
                    f"{'there' if where else 'in the gin file or -b binding'}"
                )


# ---- comparing configs (resume) ------------------------------------------------------


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
