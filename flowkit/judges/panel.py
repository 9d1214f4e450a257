"""The panel that scores generated speech: a recogniser, a speaker judge and a quality judge.

``flowkit eval`` and the training probe score with the one panel: the same judges, chosen
the same way, the same scores per clip and the same pooled error rates.

- `build_judges`: the panel. The recogniser is the one given (a plugin or a registered
  name), else `flowkit.judges.choice.default_recognizer` (Whisper where a model is on the
  machine, else pocketsphinx, with one note saying why not Whisper). The speaker judge
  (``speaker.resemblyzer``) and the quality judge (``quality.dnsmos``) are the installed
  defaults unless another is given or one is turned off; a default that is not installed
  is left out with one note naming the extra.
- `Judges`: the panel's calls. A default judge that turns out unusable on first use (its
  package or model missing: a `ConfigError` or `ImportError`) is turned off with one note,
  and its scores are None from then on; a judge the caller named (``--asr whisper``,
  ``Probe.asr = @asr.whisper()``) raises instead: what was asked for cannot run here.
- `describe`: what a judge is (``name``, ``model``, ``version`` and whatever else its
  ``describe()`` says), recorded beside every score.

What a scored clip's record holds, and the totals over records: `flowkit.judges.records`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError, FlowkitError

__all__ = ["DEFAULT", "EXTRA_HINT", "Judges", "build_judges", "describe"]

EXTRA_HINT = "pip install 'flowkit[eval]'"
DEFAULT = "auto"  # a speaker or quality judge: the installed default, else none (with a note)

#: kind -> (the default plugin's name, the score it gives)
_DEFAULTS = {"speaker": ("resemblyzer", "SIM"), "quality": ("dnsmos", "DNSMOS")}


def describe(judge: Any, kind: str) -> dict[str, str] | None:
    """``{name, model, version, ...}`` of a judge: its own ``describe()``, else its registered
    name (``<kind>.<name>``), else its type's name; None for no judge."""
    if judge is None:
        return None
    found: dict[str, str] = {}
    if callable(getattr(judge, "describe", None)):
        try:
            found = {str(k): str(v) for k, v in dict(judge.describe()).items()}
        except FlowkitError:
            found = {}
    if not found.get("name"):
        from flowkit import registry

        try:
            found["name"] = f"{kind}.{registry.record_of(judge)['name']}"
        except FlowkitError:
            found["name"] = type(judge).__name__
    return {"model": "", "version": "", **found}


@attrs.define
class Judges:
    """The judges of one eval or one training run; None where one is off or not installed."""

    asr: Any
    speaker: Any = None
    quality: Any = None
    notes: list[str] = attrs.Factory(list)  # one line per judge left out, with the extra to install
    named: frozenset[str] = frozenset()  # the kinds the caller named: their failures raise

    def describe(self) -> dict[str, dict[str, str] | None]:
        """Each judge's `describe` (None: off or not installed)."""
        return {kind: describe(getattr(self, kind), kind) for kind in ("asr", "speaker", "quality")}

    def _guard(self, kind: str, call: Callable[[], Any]) -> Any:
        """``call()``, or None after turning judge ``kind`` off when it turns out not to be
        usable here (its package or model missing: a `ConfigError` or `ImportError`).

        Raises:
            ConfigError: that failure, for a judge the caller named (``named``).
        """
        try:
            return call()
        except (ConfigError, ImportError) as exc:
            why = str(exc).strip()
            if kind in self.named:
                raise ConfigError(f"the {kind} judge {describe(getattr(self, kind), kind)['name']} cannot run "
                                  f"here: {why}") from exc
            setattr(self, kind, None)
            hint = f"; {EXTRA_HINT}" if isinstance(exc, ImportError) and EXTRA_HINT not in why else ""
            self.notes.append(f"{kind} judge off ({why}); its scores are empty{hint}")
            return None

    def asr_label(self) -> str | None:
        """The recogniser as every record names it, e.g. ``asr.whisper Systran/faster-whisper-base``
        (None without one)."""
        found = describe(self.asr, "asr")
        return None if found is None else f"{found['name']} {found['model']}".strip()

    def transcribe(self, audio: np.ndarray, sr: int, language: str) -> str | None:
        """What the recogniser hears in ``audio [samples]`` at ``sr`` Hz, or None without one."""
        if self.asr is None:
            return None
        return self._guard("asr", lambda: str(self.asr.transcribe(audio, sr, language)))

    def embed(self, audio: np.ndarray, sr: int) -> np.ndarray | None:
        """The speaker embedding ``[d]`` of ``audio [samples]``, or None without a speaker judge."""
        if self.speaker is None:
            return None
        return self._guard("speaker", lambda: np.asarray(self.speaker.embed(audio, sr)))

    def similarity(self, a: np.ndarray, sr_a: int, b: np.ndarray, sr_b: int) -> float | None:
        """Speaker similarity of ``a`` to ``b`` (cosine, -1..1), or None without a speaker judge."""
        if self.speaker is None:
            return None
        return self._guard("speaker", lambda: float(self.speaker.similarity(a, sr_a, b, sr_b)))

    def quality_scores(self, audio: np.ndarray, sr: int) -> dict[str, float] | None:
        """DNSMOS ``{"ovrl", "sig", "bak"}`` (MOS 1..5), or None without a quality judge."""
        if self.quality is None:
            return None
        found = self._guard("quality", lambda: dict(self.quality.score(audio, sr)))
        return None if found is None else {k: float(v) for k, v in found.items()}


def _recogniser(asr: Any, language: str, notes: list[str]) -> Any:
    from flowkit import registry

    if isinstance(asr, str) and asr != DEFAULT:
        registry.load_plugins()
        return registry.build("asr", asr.removeprefix("asr."))
    if asr is not None and asr != DEFAULT:
        if not hasattr(asr, "transcribe"):
            raise ConfigError(f"{asr!r} is not a recogniser; use e.g. @asr.pocketsphinx()")
        return asr
    from flowkit.judges.choice import default_recognizer, whisper_unavailable

    found = default_recognizer(language)
    why_not = whisper_unavailable(language)
    if why_not:
        notes.append(f"asr: {describe(found, 'asr')['name']}, not Whisper ({why_not})")
    return found


def _judge(kind: str, value: Any, notes: list[str], **params: Any) -> Any:
    """The ``speaker`` or ``quality`` judge ``value`` stands for: a judge as given; DEFAULT or
    True: the installed default (else None and a note); None or False: none."""
    if value is None or value is False:
        return None
    if value is not True and value != DEFAULT:
        return value
    from flowkit import registry
    from flowkit.judges import unavailable

    name, score = _DEFAULTS[kind]
    reason = unavailable(kind)
    if reason is None:
        try:
            registry.load_plugins()
            return registry.build(kind, name, **params)
        except (FlowkitError, ImportError) as exc:
            reason = f"{kind}.{name} does not build here ({str(exc).strip()}): {EXTRA_HINT}"
    notes.append(f"no {score}: {reason}")
    return None


def build_judges(asr: Any = None, *, language: str = "en", speaker: Any = DEFAULT, quality: Any = DEFAULT,
                 quality_threads: int = 1) -> Judges:
    """The panel.

    Args:
        asr: a recogniser, or a registered name (``whisper`` or ``asr.whisper``); None or
            DEFAULT: `flowkit.judges.choice.default_recognizer` for ``language``.
        language: the language the default recogniser must know.
        speaker, quality: a judge; DEFAULT or True: the installed default; None or False: none.
            A judge given (a plugin or a name) is named: its failure on first use raises.
        quality_threads: onnxruntime threads of the default DNSMOS (0: the cores, at most 4;
            ``flowkit eval`` scores one clip at a time, training leaves the cores to the step).

    Raises:
        RegistryError: ``asr`` names no registered recogniser (with the closest names).
        ConfigError: the recogniser cannot be built here, or ``asr`` has no ``transcribe``.
    """
    notes: list[str] = []
    named = {kind for kind, value in (("asr", asr), ("speaker", speaker), ("quality", quality))
             if value is not None and not isinstance(value, bool) and value != DEFAULT}
    return Judges(
        asr=_recogniser(asr, language, notes),
        speaker=_judge("speaker", speaker, notes),
        quality=_judge("quality", quality, notes, threads=quality_threads),
        notes=notes,
        named=frozenset(named),
    )
