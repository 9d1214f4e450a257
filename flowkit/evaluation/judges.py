"""The judges of ``flowkit eval``: a recogniser (WER, CER), a speaker model (SIM), a quality
model (DNSMOS), each a registered plugin built through `flowkit.registry`.

- ``asr``: ``--asr NAME`` (``whisper``, ``pocketsphinx``, a plugin's), else
  `flowkit.judges.choice.default_recognizer` (Whisper where a model is installed, else
  pocketsphinx), else ``asr.pocketsphinx``;
- ``speaker``: ``speaker.resemblyzer``: ``similarity(a, sr_a, b, sr_b) -> float`` (cosine);
- ``quality``: ``quality.dnsmos``: ``score(audio, sr) -> {"ovrl", "sig", "bak"}`` (MOS 1..5).

A judge that is not installed leaves its columns null (None) and says so in one line that
names the extra to install (`Judges.notes`). Every judge is named in the results by
``describe()`` (name, model, version) where it has one, else by its registered name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError, FlowkitError

__all__ = ["EXTRA_HINT", "Judges", "build_judges"]

EXTRA_HINT = "pip install 'flowkit[eval]'"


def _describe(judge: Any, kind: str) -> dict[str, str]:
    """``{name, model, version}`` of a judge: its own ``describe()``, else its registered name."""
    from flowkit import registry

    if hasattr(judge, "describe"):
        try:
            found = dict(judge.describe())
            return {"name": str(found.get("name", "")), "model": str(found.get("model", "")),
                    "version": str(found.get("version", ""))}
        except FlowkitError:
            pass
    try:
        name = f"{kind}.{registry.record_of(judge)['name']}"
    except FlowkitError:
        name = type(judge).__name__
    return {"name": name, "model": "", "version": ""}


@attrs.define
class Judges:
    """The judges of one eval; None where one is not installed (its columns stay null)."""

    asr: Any
    speaker: Any = None
    quality: Any = None
    notes: list[str] = attrs.Factory(list)  # one line per missing judge, with the extra to install

    def describe(self) -> dict[str, dict[str, str] | None]:
        """Each judge's ``{name, model, version}`` (None: not installed)."""
        return {kind: None if j is None else _describe(j, kind)
                for kind, j in (("asr", self.asr), ("speaker", self.speaker), ("quality", self.quality))}

    def _guard(self, kind: str, call: Callable[[], Any]) -> Any:
        """``call()``, or None after turning judge ``kind`` off when it turns out not to be
        usable here (its package or model missing: a `ConfigError` or `ImportError`)."""
        try:
            return call()
        except (ConfigError, ImportError) as exc:
            setattr(self, kind, None)
            self.notes.append(f"{kind} judge off ({str(exc).strip()}); its column is empty; {EXTRA_HINT}")
            return None

    def asr_label(self) -> str | None:
        """The recogniser as every record names it, e.g. ``asr.whisper Systran/faster-whisper-base``
        (None without one)."""
        if self.asr is None:
            return None
        found = _describe(self.asr, "asr")
        return f"{found['name']} {found['model']}".strip()

    def transcribe(self, audio: np.ndarray, sr: int, language: str) -> str | None:
        """What the recogniser hears, or None without one."""
        if self.asr is None:
            return None
        return self._guard("asr", lambda: str(self.asr.transcribe(audio, sr, language)))

    def similarity(self, a: np.ndarray, sr_a: int, b: np.ndarray, sr_b: int) -> float | None:
        """Speaker similarity of ``a`` to ``b`` (cosine, -1..1), or None without a speaker judge."""
        if self.speaker is None:
            return None
        value = self._guard("speaker", lambda: float(self.speaker.similarity(a, sr_a, b, sr_b)))
        return value

    def quality_scores(self, audio: np.ndarray, sr: int) -> dict[str, float] | None:
        """DNSMOS ``{"ovrl", "sig", "bak"}``, or None without a quality judge."""
        if self.quality is None:
            return None
        found = self._guard("quality", lambda: dict(self.quality.score(audio, sr)))
        return None if found is None else {k: float(v) for k, v in found.items()}


def _maybe_build(kind: str, name: str, what: str, notes: list[str], **params: Any) -> Any:
    from flowkit import registry

    try:
        return registry.build(kind, name, **params)
    except (FlowkitError, ImportError) as exc:
        notes.append(f"{what} ({kind}.{name}) is not installed ({str(exc).strip()}): its column is empty; {EXTRA_HINT}")
        return None


def _default_asr(language: str) -> tuple[Any, str | None]:
    """`flowkit.judges.choice.default_recognizer` where it exists, else ``asr.pocketsphinx``;
    and why Whisper was not taken (None when it was)."""
    from flowkit import registry

    try:
        from flowkit.judges.choice import default_recognizer, whisper_unavailable
    except ImportError:
        return registry.build("asr", "pocketsphinx"), None
    return default_recognizer(language=language), whisper_unavailable(language)


def build_judges(asr: str | None = None, *, language: str = "en", speaker: bool = True,
                 quality: bool = True) -> Judges:
    """The judges of an eval.

    Args:
        asr: a registered recogniser name (``whisper`` or ``asr.whisper``); None: the default.
        language: the test list's language (the default recogniser's choice depends on it).
        speaker, quality: False leaves that judge out on purpose (no note).

    Raises:
        RegistryError: ``asr`` names no registered recogniser (with the closest names).
        ConfigError: the named recogniser cannot be built here.
    """
    from flowkit import registry

    registry.load_plugins()
    notes: list[str] = []
    if asr:
        recogniser = registry.build("asr", asr.removeprefix("asr."))
    else:
        recogniser, why_not = _default_asr(language)
        if why_not:
            notes.append(f"asr: {_describe(recogniser, 'asr')['name']}, not Whisper ({why_not})")
    return Judges(
        asr=recogniser,
        speaker=_maybe_build("speaker", "resemblyzer", "speaker similarity (SIM)", notes) if speaker else None,
        # DNSMOS on the cores (at most 4), as Whisper runs: the eval scores one clip at a time
        quality=_maybe_build("quality", "dnsmos", "DNSMOS quality", notes, threads=0) if quality else None,
        notes=notes,
    )
