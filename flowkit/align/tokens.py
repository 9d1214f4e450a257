"""Text -> aligner tokens, and the words they belong to.

A segment's text is cut into whitespace words (`flowkit.data.aligners.word_char_spans`);
each word is encoded on its own by the run's text front end (``text.phonemes``: its IPA
symbols in the segment's language; ``text.chars``: its characters), and a pause token
stands before the first word, between words and after the last, so that silence has a
token to go to. A word that encodes to nothing (a lone dash) is no unit: its frames fall to
the pause around it.

Ids: the front end's vocabulary ids (0 padding, 1 unknown, 2..), and the pause token
``vocab.size`` (one past the vocabulary: `pause_id`), so an embedding of ``vocab.size + 1``
rows covers them.
"""

from __future__ import annotations

from typing import Any

import attrs

from flowkit.data.aligners import word_char_spans
from flowkit.text.vocabs import encode_text

__all__ = ["Tokens", "pause_id", "tokenize"]


def pause_id(vocab: Any) -> int:
    """The pause token's id: one past the front end's ids."""
    return int(vocab.size)


@attrs.frozen
class Tokens:
    """One segment's tokens: ``ids`` ``[nt]`` and ``words`` as ``(char_start, char_end,
    token_start, token_end)`` (ends exclusive; chars index the segment's text)."""

    ids: tuple[int, ...]
    words: tuple[tuple[int, int, int, int], ...]

    def word_frames(self, durations: Any) -> tuple[tuple[int, int, int, int], ...]:
        """Units ``(char_start, char_end, frame_start, frame_end)`` from frames per token ``[nt]``."""
        edges = [0]
        for d in durations[: len(self.ids)]:
            edges.append(edges[-1] + int(d))
        return tuple((cs, ce, edges[ts], edges[te]) for cs, ce, ts, te in self.words)


def tokenize(vocab: Any, text: str, language: str = "") -> Tokens:
    """The aligner tokens of ``text`` (see the module docstring)."""
    pause = pause_id(vocab)
    ids = [pause]
    words = []
    for cs, ce in word_char_spans(text):
        word = [i for i in encode_text(vocab, text[cs:ce], language) if i != 0]
        if not word:
            continue
        start = len(ids)
        ids += word
        words.append((cs, ce, start, len(ids)))
        ids.append(pause)
    return Tokens(tuple(ids), tuple(words))
