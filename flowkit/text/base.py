"""What every text front end shares: the reserved ids and the Unicode normalisation.

Every vocabulary (characters `flowkit.text.chars`, F5-TTS tokens `flowkit.text.f5`,
phonemes `flowkit.text.phonemes`) keeps id 0 for padding and id 1 for a symbol it
lacks, and reads text after NFC normalisation, so checkpoints of any front end share one
state-dict shape for their text embedding.
"""

from __future__ import annotations

import unicodedata

__all__ = ["PAD_ID", "UNKNOWN_ID", "normalize_text"]

PAD_ID = 0
UNKNOWN_ID = 1


def normalize_text(text: str) -> str:
    """NFC-normalise ``text`` so composed and decomposed accents give the same characters."""
    return unicodedata.normalize("NFC", text)
