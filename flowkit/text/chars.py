"""Character text front end: Unicode NFC characters mapped to ids.

Id 0 is padding, 1 is an unknown character, and 2.. are the characters seen when the
vocabulary was built, sorted by code point so the same texts always give the same ids.
The vocabulary travels with the model (`CharVocab.state_dict`), so a checkpoint decodes
text exactly as it was trained.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import attrs

from flowkit.registry import register
from flowkit.text.base import PAD_ID, UNKNOWN_ID, normalize_text

__all__ = ["CharFrontEnd", "CharVocab", "build_vocab"]


@attrs.define
class CharVocab:
    """Characters -> ids (0 pad, 1 unknown, 2.. sorted characters).

    ``unknown_count`` counts characters seen by `encode` that the vocabulary lacks: a
    non-zero count at synthesis time means text the model never saw.
    """

    chars: tuple[str, ...]
    unknown_count: int = 0
    _index: dict[str, int] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        self._index = {c: i + 2 for i, c in enumerate(self.chars)}

    @property
    def size(self) -> int:
        """Number of ids, padding and unknown included (the embedding table size)."""
        return len(self.chars) + 2

    def encode(self, text: str) -> list[int]:
        """Ids ``[nt]`` of the NFC characters of ``text``; unseen characters become 1 (counted)."""
        ids = list(map(self._index.get, normalize_text(text), itertools.repeat(UNKNOWN_ID)))
        self.unknown_count += ids.count(UNKNOWN_ID)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; padding is dropped, unknown ids become U+FFFD."""
        out = []
        for i in ids:
            if i == PAD_ID:
                continue
            out.append(self.chars[i - 2] if 2 <= i < self.size else "\ufffd")
        return "".join(out)

    def missing(self, texts: Iterable[str]) -> list[str]:
        """NFC characters of ``texts`` the vocabulary lacks, sorted by code point."""
        seen: set[str] = set()
        for text in texts:
            seen.update(normalize_text(text))
        return sorted(seen - set(self._index))

    def extended(self, chars: Iterable[str]) -> CharVocab:
        """This vocabulary with ``chars`` appended: old ids unchanged, new ones after them."""
        return CharVocab(self.chars + tuple(chars))

    def state_dict(self) -> dict[str, Any]:
        """JSON-able ``{"kind": "chars", "chars": [...]}``; `from_state_dict` restores it."""
        return {"kind": "chars", "chars": list(self.chars)}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> CharVocab:
        """The vocabulary saved by `state_dict`.

        Raises:
            ValueError: ``state`` is not a character vocabulary.
        """
        if state.get("kind") != "chars" or not isinstance(state.get("chars"), list):
            raise ValueError("not a character vocabulary state (expected kind 'chars' and a chars list)")
        return cls(tuple(state["chars"]))


@register("text", "chars")
@attrs.frozen
class CharFrontEnd:
    """Character front end: builds a `CharVocab` from the training texts (NFC normalised)."""

    def build_vocab(self, texts: Iterable[str]) -> CharVocab:
        """The vocabulary of every character in ``texts``, sorted by code point."""
        seen: set[str] = set()
        for text in texts:
            seen.update(normalize_text(text))
        return CharVocab(tuple(sorted(seen)))


def build_vocab(texts: Iterable[str]) -> CharVocab:
    """Shortcut for ``CharFrontEnd().build_vocab(texts)``."""
    return CharFrontEnd().build_vocab(texts)
