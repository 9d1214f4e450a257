"""Language labels of other formats as the ISO-639-1 codes a flowkit store keeps.

Lhotse recipes write language names ("English"), Hugging Face datasets locales
("en-US", "pt_BR") or codes ("en"). `language_code` maps them to the two-letter code;
what it cannot map it returns lowered, so prepare rejects it with ``unknown_language``
naming the value (and ``-b "prepare.languages = [...]"`` can admit it).
"""

from __future__ import annotations

import re

#: English names of the languages common in speech corpora -> ISO-639-1
NAMES: dict[str, str] = {
    "arabic": "ar", "catalan": "ca", "chinese": "zh", "mandarin": "zh", "czech": "cs", "danish": "da",
    "dutch": "nl", "english": "en", "finnish": "fi", "french": "fr", "german": "de", "greek": "el",
    "hindi": "hi", "hungarian": "hu", "indonesian": "id", "italian": "it", "japanese": "ja", "korean": "ko",
    "norwegian": "no", "persian": "fa", "polish": "pl", "portuguese": "pt", "romanian": "ro", "russian": "ru",
    "spanish": "es", "swedish": "sv", "thai": "th", "turkish": "tr", "ukrainian": "uk", "vietnamese": "vi",
}
_LOCALE = re.compile(r"^([a-z]{2})(?:[-_][a-z0-9]+)*$")


def language_code(value: object) -> str:
    """``value`` as an ISO-639-1 code: "English" -> "en", "en-US" -> "en", "" / None -> "" (unknown)."""
    text = "" if value is None else str(value).strip().lower()
    if not text:
        return ""
    if text in NAMES:
        return NAMES[text]
    match = _LOCALE.match(text)
    return match.group(1) if match else text
