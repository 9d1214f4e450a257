"""One registry for every swappable component, and the loading of declared plugins.

A component is registered under a *kind* (what it does: ``schedule``, ``loss``, ...) and a
*name*; it becomes the gin configurable ``<kind>.<name>``::

    @flowkit.register("t_sampler", "uniform")
    @attrs.frozen
    class Uniform:
        '''t ~ U[0, 1].'''
        def __call__(self, n: int, generator: torch.Generator) -> torch.Tensor: ...

    # gin:  Trainer.t_sampler = @t_sampler.uniform()

The registry knows no client module: every distribution, flowkit itself included, declares
its kinds, components and configurables in its package metadata (`flowkit.entry_points`,
which `discover` and `declared_kinds` read without importing anything). `load_plugins`
imports every declared module, once, before a config is parsed (`flowkit.config.parse`)
or a component is first looked up (`get`). ``FLOWKIT_NO_PLUGINS=1`` turns the autoload of
third-party distributions off (flowkit's own components still load).

Errors are `RegistryError`, one line each: an unknown name lists the closest registered
names, a kind+name claimed twice names both modules and distributions, a plugin whose
import fails names its distribution and the original error. A component given where
another kind is expected is a `ConfigError` naming the slot (`check_kind`).
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable
from functools import lru_cache
from importlib import metadata
from typing import Any, TypeVar

import attrs

from flowkit.entry_points import (
    AUTOLOAD_ENV,
    CONFIGURABLE_GROUP,
    NETWORK_GROUP,
    OWN_DISTRIBUTION,
    check_declared,
    closest,
    declared_kinds,
    did_you_mean,
    discover,
    entries,
)
from flowkit.errors import RegistryError

__all__ = [
    "Component",
    "check_kind",
    "components",
    "configurable",
    "from_record",
    "get",
    "load_plugins",
    "network",
    "parameters_of",
    "record_of",
    "register",
    "type_name",
]

T = TypeVar("T")


@attrs.frozen
class Component:
    """A registered component: ``obj`` is the gin-configurable class or function."""

    kind: str
    name: str
    obj: Any
    module: str
    distribution: str | None

    @property
    def gin_name(self) -> str:
        """``<kind>.<name>``, as gin files write it (``@loss.masked_mse()``)."""
        return f"{self.kind}.{self.name}"

    @property
    def summary(self) -> str:
        """The first paragraph of the docstring, on one line."""
        doc = (inspect.getdoc(self.obj) or "").strip()
        return " ".join(doc.split("\n\n", 1)[0].split()) if doc else ""

    def parameters(self) -> list[tuple[str, str, str]]:
        """``(name, type, default)`` of each configurable parameter, in order (see `parameters_of`)."""
        return parameters_of(self.obj)


_REGISTRY: dict[tuple[str, str], Component] = {}
_LOADED: str | bool = False  # False, "own" (flowkit's components) or "all"


def type_name(t: Any) -> str:
    """A type annotation as a short readable string (``float``, ``Sequence[str]``)."""
    if t is None:
        return ""
    if isinstance(t, str):
        return t
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def _value_repr(value: Any) -> str:
    """A default as gin would write it: components as ``@kind.name()`` references."""
    for comp in _REGISTRY.values():
        if type(value) is comp.obj:
            return f"@{comp.gin_name}()"
    if isinstance(value, (list, tuple)):
        items = [_value_repr(v) for v in value]
        if any(item.startswith("@") for item in items):
            inner = ", ".join(items)
            return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return repr(value)


def _default_repr(default: Any) -> str:
    if default is attrs.NOTHING:
        return "REQUIRED"
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        factory = default.factory
        try:
            return _value_repr(factory())
        except TypeError:
            return f"{getattr(factory, '__name__', factory)}()"
    return _value_repr(default)


def parameters_of(obj: Any) -> list[tuple[str, str, str]]:
    """``(name, type, default)`` of each parameter gin can bind on ``obj``, in order.

    attrs classes give their init fields with the declared type; other classes and
    functions their signature (``self``, ``*args`` and ``**kwargs`` left out). A parameter
    without a default shows ``REQUIRED``; a component default shows as ``@kind.name()``.
    """
    if attrs.has(obj):
        return [
            (f.alias or f.name, type_name(f.type), _default_repr(f.default))
            for f in attrs.fields(obj)
            if f.init
        ]
    target = obj.__init__ if inspect.isclass(obj) else obj
    out = []
    for p in inspect.signature(target).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = "REQUIRED" if p.default is p.empty else repr(p.default)
        ann = "" if p.annotation is p.empty else type_name(p.annotation)
        out.append((p.name, ann, default))
    return out


@lru_cache(maxsize=1)
def _top_level_distributions() -> dict[str, list[str]]:
    return dict(metadata.packages_distributions())


def _distribution_of(module: str) -> str | None:
    dists = _top_level_distributions().get(module.split(".")[0])
    return dists[0] if dists else None


def check_kind(value: Any, kind: str, *, where: str) -> Any:
    """``value`` if it meets the protocol of ``kind``, for a slot named ``where``.

    Raises:
        ConfigError: ``value`` lacks what the kind's protocol asks for, naming the slot,
            the value's own kind and the fix.
    """
    protocol = declared_kinds()[kind].protocol()
    if isinstance(value, protocol):
        return value
    from flowkit.errors import ConfigError

    own = next((c.gin_name for c in _REGISTRY.values() if type(value) is c.obj), type(value).__name__)
    raise ConfigError(
        f"{where} = {own} is not a {kind} (it does not meet flowkit's {protocol.__name__} "
        f"protocol); give one of: {', '.join(f'@{c.gin_name}()' for c in components(kind)) or 'none registered'}"
    )


def register(kind: str, name: str) -> Callable[[T], T]:
    """Register a class or function as component ``<kind>.<name>`` and make it gin-configurable.

    Components are best written as attrs classes with typed, defaulted fields; each field
    becomes a gin parameter (``loss.masked_mse.weight = 1.0``).

    Raises:
        RegistryError: ``kind`` is not a declared kind, or ``<kind>.<name>`` is already
            registered by another module (both modules and distributions are named).
    """
    check_declared(kind)
    if not name.isidentifier():
        raise RegistryError(f"component name {name!r} ({kind}) must be a Python identifier")

    def decorate(obj: T) -> T:
        module = getattr(obj, "__module__", "?")
        qualname = getattr(obj, "__qualname__", repr(obj))
        existing = _REGISTRY.get((kind, name))
        if existing is not None:
            same = existing.module == module and getattr(existing.obj, "__qualname__", None) == qualname
            if same:  # the same definition imported twice (e.g. a module reload)
                return existing.obj
            raise RegistryError(
                f"{kind}.{name} is registered twice: by {existing.module} "
                f"(distribution {existing.distribution or 'unknown'}) and by {module} "
                f"(distribution {_distribution_of(module) or 'unknown'}); uninstall one "
                "distribution or rename one of the components"
            )
        import gin  # local: `flowkit --help` must not import gin

        configurable = gin.configurable(name, module=kind)(obj)
        _REGISTRY[(kind, name)] = Component(kind, name, configurable, module, _distribution_of(module))
        return configurable

    return decorate


def _import_declared(module_name: str, what: str, distribution: str) -> None:
    try:
        importlib.import_module(module_name)
    except RegistryError:
        raise
    except Exception as exc:  # a broken plugin: name it, keep the cause
        raise RegistryError(
            f"plugin {what} from distribution {distribution} failed to "
            f"import {module_name}: {type(exc).__name__}: {exc} (fix or uninstall "
            f"{distribution}, or set {AUTOLOAD_ENV}=1 to skip plugins)"
        ) from exc


def load_plugins(*, third_party: bool | None = None) -> None:
    """Import every declared component and configurable module, once: flowkit's own, and
    unless disabled those of every other installed distribution.

    ``third_party=None`` follows the ``FLOWKIT_NO_PLUGINS`` environment variable (set to 1
    to skip third-party plugins).

    Raises:
        RegistryError: a plugin fails to import (its distribution and the original error
            are named), registers nothing under its declared name, or claims a kind+name
            already taken.
    """
    global _LOADED
    if third_party is None:
        third_party = os.environ.get(AUTOLOAD_ENV, "").strip().lower() not in ("1", "true", "yes")
    want = "all" if third_party else "own"
    if _LOADED == "all" or _LOADED == want:
        return
    previous, _LOADED = _LOADED, want  # a declared module may look a component up while imported
    try:
        for entry in discover():
            if entry.distribution != OWN_DISTRIBUTION and not third_party:
                continue
            module_name = entry.target.split(":")[0].strip()
            _import_declared(module_name, entry.gin_name, entry.distribution)
            if (entry.kind, entry.name) not in _REGISTRY:
                raise RegistryError(
                    f"plugin {entry.gin_name} from distribution {entry.distribution}: module "
                    f"{module_name} registered no {entry.gin_name}; check its "
                    f"@flowkit.register({entry.kind!r}, {entry.name!r})"
                )
        for name, value, dist in entries(CONFIGURABLE_GROUP):
            if dist == OWN_DISTRIBUTION or third_party:
                _import_declared(value.split(":")[0].strip(), name, dist)
    except BaseException:
        _LOADED = previous
        raise


def _declared(group: str, name: str, what: str) -> Any:
    """The object an installed distribution declares as ``name`` in entry-point ``group``,
    imported from its ``module:attr``."""
    for declared, value, dist in entries(group):
        if declared == name:
            module_name, _, attr = value.partition(":")
            _import_declared(module_name.strip(), name, dist)
            return getattr(importlib.import_module(module_name.strip()), attr.strip())
    known = [declared for declared, _, _ in entries(group)]
    raise RegistryError(f"no {what} {name!r} is declared{did_you_mean(closest(name, known))}")


def configurable(name: str) -> Any:
    """The object of the configurable ``name`` declared under ``flowkit.configurables``
    (e.g. ``"Trainer"``), imported from its declared ``module:attr``.

    Raises:
        RegistryError: no installed distribution declares ``name``.
    """
    return _declared(CONFIGURABLE_GROUP, name, "configurable")


def network(arch: str) -> type:
    """The network class declared as ``arch`` under ``flowkit.networks`` (``model.dit.arch``:
    ``flowkit``, ``f5_v1``, ``f5_base`` or a plugin's), imported.

    Raises:
        RegistryError: no installed distribution declares ``arch``.
    """
    return _declared(NETWORK_GROUP, arch, "network (model.dit.arch)")


def get(kind: str, name: str) -> Component:
    """The component ``<kind>.<name>``.

    Raises:
        RegistryError: unknown kind or name, with the closest registered names.
    """
    check_declared(kind)
    load_plugins()
    try:
        return _REGISTRY[(kind, name)]
    except KeyError:
        names = [n for k, n in _REGISTRY if k == kind]
        raise RegistryError(
            f"no {kind} named {name!r}{did_you_mean(closest(name, names))}; registered "
            f"{kind}s: {', '.join(sorted(names)) or 'none'} (see `flowkit plugins {kind}`)"
        ) from None


def components(kind: str | None = None) -> list[Component]:
    """Registered components, sorted by kind then name (all kinds when ``kind`` is None).

    Raises:
        RegistryError: ``kind`` is not a declared kind.
    """
    if kind is not None:
        check_declared(kind)
    return sorted(
        (c for (k, _), c in _REGISTRY.items() if kind is None or k == kind),
        key=lambda c: (list(declared_kinds()).index(c.kind), c.name),
    )


def build(kind: str, name: str, **kwargs: Any) -> Any:
    """Instantiate ``<kind>.<name>`` with ``kwargs`` (gin bindings apply to the rest).

    Raises:
        RegistryError: unknown kind or name (see `get`).
    """
    return get(kind, name).obj(**kwargs)


def record_of(obj: Any) -> dict[str, Any]:
    """``{"name", "params"}`` of a registered attrs component, to rebuild it where its
    config is not parsed (a checkpoint's meta: `from_record`).

    Raises:
        RegistryError: ``obj`` is not an attrs instance of a registered component.
    """
    comp = next((c for c in _REGISTRY.values() if type(obj) is c.obj), None)
    if comp is None or not attrs.has(type(obj)):
        raise RegistryError(f"{type(obj).__name__} is not a registered attrs component; it cannot be recorded")
    params = {(f.alias or f.name): getattr(obj, f.name) for f in attrs.fields(type(obj)) if f.init}
    return {"name": comp.name, "params": params}


def from_record(kind: str, record: dict[str, Any]) -> Any:
    """The component ``<kind>.<record["name"]>`` built with exactly ``record["params"]``
    (gin bindings in force do not reach a parameter the record gives).

    Raises:
        RegistryError: unknown kind or name (for example a plugin not installed here).
    """
    return get(kind, record["name"]).obj(**dict(record.get("params") or {}))
