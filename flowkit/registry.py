"""One registry for every swappable component, and third-party plugin discovery.

A component is registered under a *kind* (what it does: ``schedule``, ``loss``, ...) and a
*name*; it becomes the gin configurable ``<kind>.<name>``::

    @flowkit.register("t_sampler", "uniform")
    @attrs.frozen
    class Uniform:
        '''t ~ U[0, 1].'''
        def __call__(self, n: int, generator: torch.Generator) -> torch.Tensor: ...

    # gin:  Trainer.t_sampler = @t_sampler.uniform()

Third-party packages ship components through the ``flowkit.plugins`` entry-point group;
each entry is named ``<kind>.<name>`` and points at the module that registers it::

    [project.entry-points."flowkit.plugins"]
    "t_sampler.beta" = "flowkit_betat.samplers"

`discover` lists them from installed metadata without importing anything; `load_plugins`
imports flowkit's built-in component modules and then every entry point, once, before a
config is parsed. ``FLOWKIT_NO_PLUGINS=1`` turns the third-party autoload off.

Errors are `RegistryError`, one line each: an unknown name lists the closest registered
names, a kind+name claimed twice names both modules and distributions, a plugin whose
import fails names its distribution and the original error.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from collections.abc import Callable, Iterator
from functools import lru_cache
from importlib import metadata
from typing import Any, TypeVar

import attrs

from flowkit.errors import RegistryError

__all__ = [
    "AUTOLOAD_ENV",
    "ENTRY_POINT_GROUP",
    "KINDS",
    "Component",
    "PluginEntry",
    "closest",
    "components",
    "discover",
    "get",
    "load_plugins",
    "parameters_of",
    "register",
]

ENTRY_POINT_GROUP = "flowkit.plugins"
AUTOLOAD_ENV = "FLOWKIT_NO_PLUGINS"

#: Every kind of component, with what it does (shown by ``flowkit plugins``).
KINDS: dict[str, str] = {
    "schedule": "noise schedule: noisy sample, training target, and dx/dt from the output",
    "t_sampler": "draws the flow time t in [0, 1] for each training item",
    "loss": "a loss term with its normalising unit (frames or characters)",
    "logger": "receives metrics records (console, jsonl, tensorboard, wandb, ...)",
    "batch_sampler": "groups segments into batches",
    "pairing": "chooses each item's prompt and target span",
    "encoder": "audio -> latent frames",
    "vocoder": "latent frames -> audio",
    "solver": "ODE solver from noise (t=0) to data (t=1)",
    "lr_schedule": "learning-rate multiplier per optimizer update",
    "text": "text front end: string -> token ids",
    "aligner": "estimates unit (word) timings when no forced alignment exists",
    "model": "the network that predicts the flow target",
    "asr": "speech recogniser: audio -> text, to score what a model says (WER, CER)",
}

#: flowkit's own component modules, imported by `load_plugins` before any config parse.
BUILTIN_MODULES: tuple[str, ...] = (
    "flowkit.flow.schedules",
    "flowkit.flow.t_samplers",
    "flowkit.flow.solvers",
    "flowkit.losses",
    "flowkit.model.dit",
    "flowkit.data.text",
    "flowkit.data.text_f5",
    "flowkit.data.text_phonemes",
    "flowkit.data.encoders",
    "flowkit.data.aligners",
    "flowkit.batching.samplers",
    "flowkit.batching.pairing",
    "flowkit.train.lr_schedules",
    "flowkit.loggers.progress",
    "flowkit.loggers.jsonl",
    "flowkit.loggers.tensorboard",
    "flowkit.loggers.wandb",
    "flowkit.synth.vocoders",
    "flowkit.asr.recognizers",
    # Not components: the gin-configurable ``Trainer`` settings every run file binds, and
    # the probe's ``Probe`` settings.
    "flowkit.train.settings",
    "flowkit.train.probe",
)

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


@attrs.frozen
class PluginEntry:
    """An installed third-party plugin as its metadata declares it (nothing imported)."""

    kind: str
    name: str
    target: str  # "module" or "module:attr"
    distribution: str

    @property
    def gin_name(self) -> str:
        return f"{self.kind}.{self.name}"


_REGISTRY: dict[tuple[str, str], Component] = {}
_LOADED = False


def _type_name(t: Any) -> str:
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
            (f.alias or f.name, _type_name(f.type), _default_repr(f.default))
            for f in attrs.fields(obj)
            if f.init
        ]
    target = obj.__init__ if inspect.isclass(obj) else obj
    out = []
    for p in inspect.signature(target).parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        default = "REQUIRED" if p.default is p.empty else repr(p.default)
        ann = "" if p.annotation is p.empty else _type_name(p.annotation)
        out.append((p.name, ann, default))
    return out


@lru_cache(maxsize=1)
def _top_level_distributions() -> dict[str, list[str]]:
    return dict(metadata.packages_distributions())


def _distribution_of(module: str) -> str | None:
    dists = _top_level_distributions().get(module.split(".")[0])
    return dists[0] if dists else None


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        hint = closest(kind, KINDS)
        raise RegistryError(
            f"unknown component kind {kind!r}{_did_you_mean(hint)}; kinds are: "
            + ", ".join(KINDS)
        )


def register(kind: str, name: str) -> Callable[[T], T]:
    """Register a class or function as component ``<kind>.<name>`` and make it gin-configurable.

    Components are best written as attrs classes with typed, defaulted fields; each field
    becomes a gin parameter (``loss.masked_mse.weight = 1.0``).

    Raises:
        RegistryError: ``kind`` is not one of `KINDS`, or ``<kind>.<name>`` is already
            registered by another module (both modules and distributions are named).
    """
    _check_kind(kind)
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


def discover() -> list[PluginEntry]:
    """Third-party plugins declared by installed distributions, read from metadata only.

    Raises:
        RegistryError: an entry point name that is not ``<kind>.<name>`` with a known kind,
            or two distributions declaring the same ``<kind>.<name>``.
    """
    found: dict[str, PluginEntry] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else "unknown"
        kind, _, name = ep.name.partition(".")
        if not name:
            raise RegistryError(
                f"entry point {ep.name!r} of distribution {dist} in group {ENTRY_POINT_GROUP} "
                "must be named '<kind>.<name>', e.g. 't_sampler.beta'"
            )
        _check_kind(kind)
        entry = PluginEntry(kind, name, ep.value, dist)
        other = found.get(ep.name)
        if other is not None and other.distribution != dist:
            raise RegistryError(
                f"{ep.name} is declared by two distributions: {other.distribution} "
                f"({other.target}) and {dist} ({ep.value}); uninstall one of them"
            )
        found[ep.name] = entry
    return sorted(found.values(), key=lambda e: (e.kind, e.name))


def load_plugins(*, third_party: bool | None = None) -> None:
    """Import flowkit's built-in components and, unless disabled, every installed plugin.

    Safe to call many times; the imports happen once. ``third_party=None`` follows the
    ``FLOWKIT_NO_PLUGINS`` environment variable (set to 1 to skip third-party plugins).

    Raises:
        RegistryError: a plugin fails to import (its distribution and the original error
            are named), or claims a kind+name already taken.
    """
    global _LOADED
    if _LOADED:
        return
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    if third_party is None:
        third_party = os.environ.get(AUTOLOAD_ENV, "").strip().lower() not in ("1", "true", "yes")
    if third_party:
        for entry in discover():
            module_name = entry.target.split(":")[0].strip()
            try:
                importlib.import_module(module_name)
            except RegistryError:
                raise
            except Exception as exc:  # a broken plugin: name it, keep the cause
                raise RegistryError(
                    f"plugin {entry.gin_name} from distribution {entry.distribution} failed to "
                    f"import {module_name}: {type(exc).__name__}: {exc} (fix or uninstall "
                    f"{entry.distribution}, or set {AUTOLOAD_ENV}=1 to skip plugins)"
                ) from exc
            if (entry.kind, entry.name) not in _REGISTRY:
                raise RegistryError(
                    f"plugin {entry.gin_name} from distribution {entry.distribution}: module "
                    f"{module_name} registered no {entry.gin_name}; check its "
                    f"@flowkit.register({entry.kind!r}, {entry.name!r})"
                )
    _LOADED = True


def closest(word: str, candidates: Iterator[str] | list[str] | dict[str, Any], n: int = 3) -> list[str]:
    """Up to ``n`` candidates closest to ``word`` (difflib ratio >= 0.5), best first."""
    return difflib.get_close_matches(word, list(candidates), n=n, cutoff=0.5)


def _did_you_mean(hints: list[str]) -> str:
    return f" (did you mean {' or '.join(repr(h) for h in hints)}?)" if hints else ""


def get(kind: str, name: str) -> Component:
    """The component ``<kind>.<name>``.

    Raises:
        RegistryError: unknown kind or name, with the closest registered names.
    """
    _check_kind(kind)
    try:
        return _REGISTRY[(kind, name)]
    except KeyError:
        names = [n for k, n in _REGISTRY if k == kind]
        raise RegistryError(
            f"no {kind} named {name!r}{_did_you_mean(closest(name, names))}; registered "
            f"{kind}s: {', '.join(sorted(names)) or 'none'} (see `flowkit plugins {kind}`)"
        ) from None


def components(kind: str | None = None) -> list[Component]:
    """Registered components, sorted by kind then name (all kinds when ``kind`` is None).

    Raises:
        RegistryError: ``kind`` is not one of `KINDS`.
    """
    if kind is not None:
        _check_kind(kind)
    return sorted(
        (c for (k, _), c in _REGISTRY.items() if kind is None or k == kind),
        key=lambda c: (list(KINDS).index(c.kind), c.name),
    )


def build(kind: str, name: str, **kwargs: Any) -> Any:
    """Instantiate ``<kind>.<name>`` with ``kwargs`` (gin bindings apply to the rest).

    Raises:
        RegistryError: unknown kind or name (see `get`).
    """
    return get(kind, name).obj(**kwargs)
