"""Any front end's vocabulary, as the trainer, synthesis and interop meet it: encode a
segment's text (with its language where the front end reads one), build a vocabulary from
the training texts, and rebuild the one a checkpoint saved, by its ``kind``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["build_vocab_for", "encode_text", "vocab_from_state_dict"]


def encode_text(vocab: Any, text: str, language: str = "") -> list[int]:
    """Ids ``[nt]`` of ``text`` with any front end's vocabulary: one that reads the
    segment's language (``needs_language``, e.g. `flowkit.text.phonemes.PhonemeVocab`)
    gets it, the others only the text."""
    if getattr(vocab, "needs_language", False):
        return vocab.encode(text, language)
    return vocab.encode(text)


def build_vocab_for(front_end: Any, texts: Iterable[str], languages: Iterable[str]) -> Any:
    """``front_end.build_vocab`` of the training texts, with their languages when it reads them."""
    if getattr(front_end, "needs_language", False):
        return front_end.build_vocab(texts, languages)
    return front_end.build_vocab(texts)


def vocab_from_state_dict(state: dict[str, Any]) -> Any:
    """The vocabulary a checkpoint saved, whichever text front end made it (by ``kind``).

    Raises:
        ValueError: an unknown vocabulary kind.
    """
    kind = state.get("kind")
    if kind == "chars":
        from flowkit.text.chars import CharVocab

        return CharVocab.from_state_dict(state)
    if kind == "f5":
        from flowkit.text.f5 import F5Vocab

        return F5Vocab.from_state_dict(state)
    if kind == "phonemes":
        from flowkit.text.phonemes import PhonemeVocab

        return PhonemeVocab.from_state_dict(state)
    raise ValueError(f"vocabulary kind {kind!r} is not known (this flowkit reads 'chars', 'f5' and 'phonemes')")
