"""The text normalisation every WER/CER in flowkit is computed on.

A recogniser writes "press seven", a transcript "Press 7."; scoring compares words, not
spelling conventions, so both sides go through `normalise_for_scoring`:

1. Unicode NFKC, then lower case (``str.casefold``);
2. numbers written with digits become words of the language (num2words: "7" -> "seven";
   an ordinal suffix of English, French, Spanish or Italian reads as an ordinal:
   "2nd" -> "second"); where num2words does not know the language the digits stay;
3. punctuation and symbols become spaces, except an apostrophe or hyphen inside a word
   ("don't" stays one word, "voice-mail" becomes "voice mail");
4. runs of white space collapse to one space; the ends are stripped.

Bracketed notes of a transcript ("(tone plays)", "[!]") are removed: nobody says them.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["normalise_for_scoring"]

# Notes in brackets are not speech: "(simple tone sound plays)", "[!]".
_NOTES = re.compile(r"\([^)]*\)|\[[^\]]*\]")
# A number: digits with optional thousands separators and decimals; an optional ordinal suffix.
_NUMBER = re.compile(r"(?<![\w])(\d+(?:[.,]\d+)?)(st|nd|rd|th|er|e|re|º|ª|o|a)?(?![\w])")
_ORDINAL_SUFFIXES = {
    "en": {"st", "nd", "rd", "th"},
    "fr": {"er", "e", "re"},
    "es": {"º", "ª", "o", "a"},
    "it": {"º", "ª", "o", "a"},
}


def _number_words(number: str, suffix: str | None, language: str) -> str | None:
    """``number`` (digits) in words of ``language``, or None where num2words cannot."""
    from num2words import num2words

    ordinal = bool(suffix) and suffix in _ORDINAL_SUFFIXES.get(language, set())
    if suffix and not ordinal:
        return None
    value: float | int
    if "." in number or "," in number:
        if ordinal:
            return None
        value = float(number.replace(",", "."))
    else:
        value = int(number)
    try:
        return num2words(value, lang=language, to="ordinal" if ordinal else "cardinal")
    except (NotImplementedError, OverflowError, ValueError, TypeError, KeyError):
        return None


def normalise_for_scoring(text: str, language: str = "en") -> str:
    """Normalise ``text`` of ``language`` (ISO 639-1, e.g. "en") for WER/CER scoring.

    Steps as in the module docstring: lower case, numbers to words where num2words knows
    ``language``, punctuation to spaces (word-inner apostrophes kept), bracketed notes
    removed, white space collapsed. Idempotent: normalising twice changes nothing.

    >>> normalise_for_scoring("Press 7 -- to hear Allison's voice-mail!")
    "press seven to hear allison's voice mail"
    """
    text = unicodedata.normalize("NFKC", text)
    text = _NOTES.sub(" ", text)
    lang = (language or "en").split("-")[0].split("_")[0].lower()

    def spell(match: re.Match[str]) -> str:
        words = _number_words(match.group(1), match.group(2), lang)
        return f" {words} " if words is not None else match.group(0)

    text = _NUMBER.sub(spell, text).casefold()
    out = []
    for i, ch in enumerate(text):
        cat = unicodedata.category(ch)
        if cat[0] in "LNM":
            out.append(ch)
        elif ch in "'’-" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            out.append("'" if ch != "-" else " ")
        else:
            out.append(" ")
    return " ".join("".join(out).split())
