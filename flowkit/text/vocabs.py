"""Any front end's vocabulary, as the trainer, synthesis and interop meet it: encode a
segment's text (with its language where the front end reads one), build a vocabulary from
the training texts, rebuild the one a checkpoint saved, by its ``kind``, and name the ids
that separate a text's units (words).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

__all__ = ["RebuiltVocab", "build_vocab_for", "encode_text", "grown_vocab", "missing_tokens", "rebuild_vocab",
           "separator_ids", "vocab_from_state_dict"]


def encode_text(vocab: Any, text: str, language: str = "") -> list[int]:
    """Ids ``[nt]`` of ``text`` with any front end's vocabulary: one that reads the
    segment's language (``needs_language``, e.g. `flowkit.text.phonemes.PhonemeVocab`)
    gets it, the others only the text."""
    if getattr(vocab, "needs_language", False):
        return vocab.encode(text, language)
    return vocab.encode(text)


def separator_ids(vocab: Any) -> tuple[int, ...]:
    """The ids of a space in ``vocab``: they separate the units (words) of a text.

    A vocabulary that never saw a space encodes it as the unknown id 1, which must not
    split units: then ``()``.
    """
    return tuple(i for i in vocab.encode(" ") if i > 1)


def build_vocab_for(front_end: Any, texts: Iterable[str], languages: Iterable[str]) -> Any:
    """``front_end.build_vocab`` of the training texts, with their languages when it reads them."""
    if getattr(front_end, "needs_language", False):
        return front_end.build_vocab(texts, languages)
    return front_end.build_vocab(texts)


def missing_tokens(vocab: Any, texts: Iterable[str], languages: Iterable[str]) -> list[str]:
    """The tokens of ``texts`` (in their ``languages`` where the front end reads them)
    ``vocab`` lacks, sorted; ``[]`` for a vocabulary that cannot grow."""
    if not hasattr(vocab, "missing"):
        return []
    if getattr(vocab, "needs_language", False):
        return vocab.missing(texts, languages)
    return vocab.missing(texts)


def grown_vocab(vocab: Any, texts: Iterable[str], languages: Iterable[str]) -> tuple[Any, list[str]]:
    """``(vocab with the tokens of texts it lacks appended, those tokens)``: old ids unchanged,
    new ones after them (`missing_tokens`); ``(vocab, [])`` when none is missing. A vocabulary
    that reads languages also keeps a voice for each new one.

    Raises:
        DataError: (phonemes) no espeak-ng voice for a language.
    """
    languages = list(languages)
    added = missing_tokens(vocab, texts, languages)
    if not added:
        return vocab, []
    if getattr(vocab, "needs_language", False):
        return vocab.extended(added, sorted(set(languages))), added
    return vocab.extended(added), added


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


@attrs.frozen
class RebuiltVocab:
    """A checkpoint's vocabulary as synthesis meets it (`rebuild_vocab`).

    Attributes:
        vocab: the front end's vocabulary (`vocab_from_state_dict`).
        size: its number of ids, padding and unknown included (the text embedding's rows).
        separator_ids: the ids that separate a text's units (`separator_ids`).
    """

    vocab: Any
    size: int
    separator_ids: tuple[int, ...]


def rebuild_vocab(state: dict[str, Any]) -> RebuiltVocab:
    """The vocabulary a checkpoint saved, with its size and unit separators, in one call.

    Raises:
        ValueError: an unknown vocabulary kind.
    """
    vocab = vocab_from_state_dict(state)
    return RebuiltVocab(vocab=vocab, size=int(vocab.size), separator_ids=separator_ids(vocab))
