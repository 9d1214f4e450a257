"""Phoneme text front end: raw text -> IPA phonemes (phonemizer, espeak-ng backend) -> ids.

The store keeps raw text; the front end is chosen at training time
(``Trainer.text = @text.phonemes()``). Each segment is phonemized in its own language:
the store's ISO-639-1 code mapped to an espeak-ng voice (``en`` -> ``en-us``, ``fr`` ->
``fr-fr``, ``zh`` -> ``cmn``, else the code itself when espeak-ng knows it), or
``default_language`` for segments without one. Requires the ``phonemes`` extra
(``pip install 'flowkit[phonemes]'``) and the espeak-ng program (Debian package
``espeak-ng``; ``tools/setup.sh`` installs it).

Tokens: phonemizer separates phones with spaces and words with ``|``
(`phonemizer.separator.Separator`); flowkit keeps each phone as one symbol (so ``tʃ``
or ``ɑ̃`` are one id), splits stress marks (``ˈ``, ``ˌ``) and punctuation off into symbols
of their own, and turns word boundaries into ``" "``. The vocabulary is every symbol of
the training texts, sorted by code point after id 0 (padding) and 1 (unknown), and it is
saved with the checkpoint together with the voices used, so synthesis phonemizes exactly
as training did. Phonemizations are cached per (voice, text) in each process.

Shape legend: nt text tokens.
"""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from flowkit.errors import ConfigError, DataError
from flowkit.registry import register
from flowkit.text.base import PAD_ID, UNKNOWN_ID, normalize_text

WORD = " "  # the symbol of a word boundary
STRESS = frozenset("ˈˌ")
PUNCTUATION = frozenset(";:,.!?¡¿—…\"«»“”()-")
#: ISO-639-1 codes whose espeak-ng voice has another name
VOICES: dict[str, str] = {"en": "en-us", "fr": "fr-fr", "zh": "cmn", "pt": "pt", "es": "es"}


def _phonemizer() -> Any:
    try:
        from phonemizer.backend import EspeakBackend
    except ImportError:
        raise ConfigError("text.phonemes needs phonemizer: pip install 'flowkit[phonemes]'") from None
    if shutil.which("espeak-ng") is None and shutil.which("espeak") is None:
        raise ConfigError("text.phonemes needs the espeak-ng program: "
                          "apt-get install espeak-ng (tools/setup.sh does it)")
    return EspeakBackend


@functools.cache
def _backend(voice: str) -> Any:
    backend = _phonemizer()
    return backend(voice, preserve_punctuation=True, with_stress=True, language_switch="remove-flags",
                   words_mismatch="ignore")


@functools.cache
def supported_voices() -> frozenset[str]:
    """The espeak-ng voices phonemizer knows on this machine."""
    return frozenset(_phonemizer().supported_languages())


def voice_for(language: str, default_language: str, overrides: Mapping[str, str] | None = None) -> str:
    """The espeak-ng voice of an ISO-639-1 ``language`` ("" -> ``default_language``).

    Raises:
        DataError: no espeak-ng voice for the language (the message names the fix).
    """
    code = language or default_language
    voice = (overrides or {}).get(code) or VOICES.get(code, code)
    if voice not in supported_voices():
        raise DataError(f"text.phonemes: no espeak-ng voice for language {code!r} (tried {voice!r}); "
                        "set text.phonemes.voices = {'" + code + "': '<voice>'} with a voice from "
                        "`espeak-ng --voices`, or train with text.chars")
    return voice


def split_symbols(phonemized: str) -> list[str]:
    """Symbols of phonemizer's output (phones split by spaces, words by ``|``)."""
    out: list[str] = []
    for w, word in enumerate(phonemized.strip().split("|")):
        if w and out and out[-1] != WORD:
            out.append(WORD)
        for phone in word.split():
            tail: list[str] = []
            while phone and (phone[0] in STRESS or phone[0] in PUNCTUATION):
                out.append(phone[0])
                phone = phone[1:]
            while phone and phone[-1] in PUNCTUATION:
                tail.insert(0, phone[-1])
                phone = phone[:-1]
            if phone:
                out.append(phone)
            out += tail
    while out and out[-1] == WORD:
        out.pop()
    return out


#: libespeak-ng keeps one global state: batch-building threads take turns
_ESPEAK = threading.Lock()


@functools.lru_cache(maxsize=200_000)
def phonemize(text: str, voice: str) -> tuple[str, ...]:
    """IPA symbols of ``text`` read with the espeak-ng ``voice`` (cached per process)."""
    from phonemizer.separator import Separator

    with _ESPEAK:
        [result] = _backend(voice).phonemize([normalize_text(text)],
                                             separator=Separator(phone=" ", word="|", syllable=""), strip=True)
    return tuple(split_symbols(result))


def _gap_symbols(gap: str) -> list[str]:
    """Symbols of the text between two units: its punctuation, and one word boundary for
    any run of spaces (nothing for an empty gap)."""
    out: list[str] = []
    for ch in gap:
        if ch.isspace():
            if not out or out[-1] != WORD:
                out.append(WORD)
        elif ch in PUNCTUATION:
            out.append(ch)
    return out


@attrs.define
class PhonemeVocab:
    """IPA symbols -> ids (0 pad, 1 unknown, 2.. sorted symbols) and the voices they were made with.

    ``unknown_count`` counts symbols `encode` met that the vocabulary lacks.
    """

    symbols: tuple[str, ...]
    voices: dict[str, str]  # ISO code ("" unknown) -> espeak-ng voice used in training
    default_language: str = "en"
    unknown_count: int = 0
    needs_language = True  # encode reads the segment's language
    _index: dict[str, int] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        self._index = {s: i + 2 for i, s in enumerate(self.symbols)}

    @property
    def size(self) -> int:
        """Number of ids, padding and unknown included (the embedding table size)."""
        return len(self.symbols) + 2

    def symbols_of(self, text: str, language: str = "") -> tuple[str, ...]:
        """The IPA symbols of ``text`` in ``language`` (the voice saved for it, else looked up).

        Raises:
            DataError: no espeak-ng voice for the language.
        """
        voice = self.voices.get(language) or voice_for(language, self.default_language, self.voices)
        return phonemize(text, voice)

    def encode(self, text: str, language: str = "") -> list[int]:
        """Ids ``[nt]`` of ``text`` phonemized in ``language``; unseen symbols become 1 (counted).

        A text of spaces only is the word boundary (``[id of " "]``): synthesis asks the
        vocabulary for its separator that way.
        """
        symbols = (WORD,) if text and not text.strip() else self.symbols_of(text, language)
        return self._ids(symbols)

    def _ids(self, symbols: Iterable[str]) -> list[int]:
        ids = [self._index.get(s, UNKNOWN_ID) for s in symbols]
        self.unknown_count += sum(1 for i in ids if i == UNKNOWN_ID)
        return ids

    def encode_units(
        self, text: str, units: Iterable[tuple[int, int, int, int]], language: str = ""
    ) -> tuple[list[int], tuple[tuple[int, int, int, int], ...]]:
        """Ids ``[nt]`` and unit timings over them, for the aligned text path.

        ``units`` are ``(char_start, char_end, frame_start, frame_end)`` over ``text`` (in
        order, not overlapping: as the store keeps them). Each unit's text is phonemized on
        its own, so its symbols are exactly the unit's; the text between units gives its
        punctuation and a word boundary (`_gap_symbols`), which belong to no unit (the
        pauses the duration head learns). Returns the ids and ``(token_start, token_end,
        frame_start, frame_end)`` per unit, the frames unchanged.
        """
        symbols: list[str] = []
        out: list[tuple[int, int, int, int]] = []
        pos = 0
        for cs, ce, fs, fe in units:
            symbols += _gap_symbols(text[pos:cs])
            start = len(symbols)
            symbols += self.symbols_of(text[cs:ce], language)
            out.append((start, len(symbols), fs, fe))
            pos = ce
        symbols += _gap_symbols(text[pos:])
        return self._ids(symbols), tuple(out)

    def missing(self, texts: Iterable[str], languages: Iterable[str] | None = None) -> list[str]:
        """Symbols of ``texts`` (each phonemized in its ``languages`` entry; None: the default
        language) the vocabulary lacks, sorted by code point: what growing it for new data adds.

        Raises:
            DataError: no espeak-ng voice for a language.
        """
        seen: set[str] = set()
        langs = iter(languages) if languages is not None else None
        for text in texts:
            seen.update(self.symbols_of(text, next(langs) if langs is not None else ""))
        return sorted(seen - set(self._index))

    def extended(self, symbols: Iterable[str], languages: Iterable[str] = ()) -> PhonemeVocab:
        """This vocabulary with ``symbols`` appended (old ids unchanged, new ones after them)
        and a voice saved for each of ``languages`` it has none for."""
        voices = dict(self.voices)
        for language in languages:
            if language not in voices:
                voices[language] = voice_for(language, self.default_language, self.voices)
        return PhonemeVocab(self.symbols + tuple(symbols), voices, self.default_language)

    def decode(self, ids: Iterable[int]) -> str:
        """Symbols of ``ids`` joined (word boundaries are spaces); padding dropped, unknown -> U+FFFD."""
        return "".join(self.symbols[i - 2] if 2 <= i < self.size else "\ufffd" for i in ids if i != PAD_ID)

    def state_dict(self) -> dict[str, Any]:
        """JSON-able ``{"kind": "phonemes", "symbols", "voices", "default_language", "espeak"}``."""
        version = ".".join(map(str, _phonemizer().version()))
        return {"kind": "phonemes", "symbols": list(self.symbols), "voices": dict(self.voices),
                "default_language": self.default_language, "espeak": version}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> PhonemeVocab:
        """The vocabulary saved by `state_dict`.

        Raises:
            ValueError: ``state`` is not a phoneme vocabulary.
        """
        if state.get("kind") != "phonemes" or not isinstance(state.get("symbols"), list):
            raise ValueError("not a phoneme vocabulary state (expected kind 'phonemes' and a symbols list)")
        return cls(tuple(state["symbols"]), dict(state.get("voices") or {}), str(state.get("default_language", "en")))


@register("text", "phonemes")
@attrs.frozen
class PhonemeFrontEnd:
    """IPA phonemes from espeak-ng (through phonemizer), per segment language (see the module docstring)."""

    default_language: str = "en"  # for segments without a language
    # ISO code -> espeak-ng voice, beside the built-in map (en -> en-us, fr -> fr-fr, zh -> cmn)
    voices: dict[str, str] = attrs.field(factory=dict)
    needs_language = True  # build_vocab reads the segments' languages

    def build_vocab(self, texts: Iterable[str], languages: Iterable[str] | None = None) -> PhonemeVocab:
        """The vocabulary of every symbol of ``texts`` (each phonemized in its ``languages`` entry).

        Raises:
            ConfigError: phonemizer or espeak-ng is missing.
            DataError: a language without an espeak-ng voice.
        """
        _phonemizer()
        seen: set[str] = set()
        used: dict[str, str] = {}
        langs = iter(languages) if languages is not None else None
        for text in texts:
            language = next(langs) if langs is not None else ""
            if language not in used:
                used[language] = voice_for(language, self.default_language, self.voices)
            seen.update(phonemize(text, used[language]))
        return PhonemeVocab(tuple(sorted(seen)), used, self.default_language)
