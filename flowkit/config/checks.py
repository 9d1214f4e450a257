"""Checks gin does not make at parse time: a required value left unset (``%gin.REQUIRED``),
a macro no source defines, and a value of the wrong type for its attrs field. Each refuses
with one line naming the file and line of the binding (`flowkit.config.sources.where_bound`)."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator

import attrs
import gin

from flowkit import registry
from flowkit.config.names import display_name, suggest
from flowkit.config.sources import where_bound
from flowkit.errors import ConfigError

__all__ = ["REQUIRED_FIXES", "check_macros", "check_required", "check_types"]

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


def check_required() -> None:
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
            name = (display_name(gin.config._REGISTRY.get_match(selector)) if gin.config._REGISTRY.get_match(selector)
                    else selector)
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


def check_macros() -> None:
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
                    name = display_name(configurable) if configurable else selector
                    full = f"{scope}/{name}.{param}" if scope else f"{name}.{param}"
                    where = where_bound(full)
                near = suggest(macro, defined)
                raise ConfigError(
                    f"{where + ': ' if where else ''}{full} = %{macro} uses macro {macro}, which is not defined"
                    f"{'; ' + near if near else ''}; define it ({macro} = ...) in a gin file or with "
                    f"-b \"{macro} = ...\""
                )


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


def check_types() -> None:
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
                name = display_name(configurable)
                full = f"{scope}/{name}" if scope else name
                where = where_bound(f"{full}.{param}")
                raise ConfigError(
                    f"{where + ': ' if where else ''}{full}.{param} = {value!r}: expected "
                    f"{registry.type_name(hints[field.name])}, got {type(value).__name__}; fix the value "
                    f"{'there' if where else 'in the gin file or -b binding'}"
                )
