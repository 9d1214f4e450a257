"""What installed distributions declare to flowkit, read from package metadata only.

Every distribution, flowkit itself included, declares what it brings in its entry points
(nothing is imported to list them)::

    [project.entry-points."flowkit.kinds"]         # a kind and the protocol it meets
    asr = "flowkit_asr.protocols:ASR"
    [project.entry-points."flowkit.plugins"]       # a component and the module registering it
    "asr.whisper_tiny" = "flowkit_asr.whisper"
    [project.entry-points."flowkit.configurables"] # a gin entry point that is not a component
    Trainer = "flowkit.train.settings:Trainer"
    [project.entry-points."flowkit.networks"]      # a model.dit.arch and the DiT (sub)class it builds
    f5_v1 = "flowkit.interop.f5_network:F5DiT"

`declared_kinds`, `discover` and `networks` list them; `flowkit.registry` imports the declared modules
(`flowkit.registry.load_plugins`). Errors are `RegistryError`, one line each: a kind or
component declared by two distributions names both, an unknown kind lists the closest
declared ones (`closest`, `did_you_mean`).
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Iterator
from functools import lru_cache
from importlib import metadata
from typing import Any

import attrs

from flowkit.errors import RegistryError

__all__ = [
    "AUTOLOAD_ENV",
    "CONFIGURABLE_GROUP",
    "ENTRY_POINT_GROUP",
    "KIND_GROUP",
    "NETWORK_GROUP",
    "OWN_DISTRIBUTION",
    "KindEntry",
    "PluginEntry",
    "check_declared",
    "closest",
    "declared_kinds",
    "did_you_mean",
    "discover",
    "entries",
    "installed_version",
    "kinds",
    "networks",
]

ENTRY_POINT_GROUP = "flowkit.plugins"
KIND_GROUP = "flowkit.kinds"
CONFIGURABLE_GROUP = "flowkit.configurables"
NETWORK_GROUP = "flowkit.networks"
AUTOLOAD_ENV = "FLOWKIT_NO_PLUGINS"
#: The distribution whose declarations are always loaded (``FLOWKIT_NO_PLUGINS`` aside).
OWN_DISTRIBUTION = "flowkit"


@attrs.frozen
class KindEntry:
    """A kind as its distribution declares it: ``target`` is ``module:Protocol``."""

    name: str
    target: str
    distribution: str

    def protocol(self) -> type:
        """The protocol class components of this kind meet (imports its module)."""
        module, _, attr = self.target.partition(":")
        obj: Any = importlib.import_module(module.strip())
        for part in attr.strip().split(".") if attr else ():
            obj = getattr(obj, part)
        return obj

    def describe(self) -> str:
        """The first line of the protocol's docstring (imports its module)."""
        doc = (inspect.getdoc(self.protocol()) or "").strip()
        return doc.split("\n", 1)[0] if doc else ""


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


def entries(group: str) -> list[tuple[str, str, str]]:
    """``(name, value, distribution)`` of every entry point of ``group`` (metadata only)."""
    return [(ep.name, ep.value, ep.dist.name if ep.dist is not None else "unknown")
            for ep in metadata.entry_points(group=group)]


@lru_cache(maxsize=1)
def declared_kinds() -> dict[str, KindEntry]:
    """Every kind declared by an installed distribution (group ``flowkit.kinds``), in
    declaration order with flowkit's own first; nothing is imported.

    Raises:
        RegistryError: flowkit's own metadata declares no kind (a stale install), or two
            distributions declare the same kind.
    """
    found: dict[str, KindEntry] = {}
    declared = sorted(entries(KIND_GROUP), key=lambda e: e[2] != OWN_DISTRIBUTION)
    for name, value, dist in declared:
        other = found.get(name)
        if other is not None and other.distribution != dist:
            raise RegistryError(
                f"component kind {name!r} is declared by two distributions: {other.distribution} "
                f"({other.target}) and {dist} ({value}); uninstall one of them"
            )
        found[name] = KindEntry(name, value, dist)
    if not any(k.distribution == OWN_DISTRIBUTION for k in found.values()):
        raise RegistryError(
            f"the installed flowkit declares no component kinds (entry points {KIND_GROUP!r} of "
            "pyproject.toml are missing from its metadata): reinstall it (make setup, or "
            "pip install -e .)"
        )
    return found


def kinds() -> dict[str, str]:
    """``{kind: what it does}`` for every declared kind (imports the protocol modules)."""
    return {name: entry.describe() for name, entry in declared_kinds().items()}


def check_declared(kind: str) -> None:
    """Nothing when ``kind`` is a declared kind.

    Raises:
        RegistryError: ``kind`` is not declared, with the closest declared kinds.
    """
    known = declared_kinds()
    if kind not in known:
        hint = closest(kind, known)
        raise RegistryError(
            f"unknown component kind {kind!r}{did_you_mean(hint)}; kinds are: "
            + ", ".join(known) + " (a plugin declares a new one in its 'flowkit.kinds' entry points)"
        )


def discover() -> list[PluginEntry]:
    """Components declared by installed distributions (flowkit's own included), read from
    metadata only.

    Raises:
        RegistryError: an entry point name that is not ``<kind>.<name>`` with a declared
            kind, or two distributions declaring the same ``<kind>.<name>``.
    """
    found: dict[str, PluginEntry] = {}
    for gin_name, value, dist in entries(ENTRY_POINT_GROUP):
        kind, _, name = gin_name.partition(".")
        if not name:
            raise RegistryError(
                f"entry point {gin_name!r} of distribution {dist} in group {ENTRY_POINT_GROUP} "
                "must be named '<kind>.<name>', e.g. 't_sampler.beta'"
            )
        check_declared(kind)
        other = found.get(gin_name)
        if other is not None and other.distribution != dist:
            raise RegistryError(
                f"{gin_name} is declared by two distributions: {other.distribution} "
                f"({other.target}) and {dist} ({value}); uninstall one of them"
            )
        found[gin_name] = PluginEntry(kind, name, value, dist)
    return sorted(found.values(), key=lambda e: (list(declared_kinds()).index(e.kind), e.name))


def networks() -> dict[str, str]:
    """``{arch: "module:Class"}``: every network declared (group ``flowkit.networks``), the
    values ``model.dit.arch`` takes; flowkit declares its own DiT (``flowkit``) and F5-TTS's
    arithmetic (``f5_v1``, ``f5_base``). Nothing is imported."""
    return {name: value for name, value, _ in entries(NETWORK_GROUP)}


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution`` (e.g. ``"faster-whisper"``), else ``"not installed"``:
    what a judge's ``describe()`` records beside its model."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def closest(word: str, candidates: Iterator[str] | list[str] | dict[str, Any], n: int = 3) -> list[str]:
    """Up to ``n`` candidates closest to ``word`` (difflib ratio >= 0.5), best first."""
    return difflib.get_close_matches(word, list(candidates), n=n, cutoff=0.5)


def did_you_mean(hints: list[str]) -> str:
    return f" (did you mean {' or '.join(repr(h) for h in hints)}?)" if hints else ""
