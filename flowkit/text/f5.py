"""F5-TTS's tokenizer as a flowkit text front end (``text.f5``).

Shape legend: nt text tokens.

F5-TTS (SWivid/F5-TTS, ``model/utils.py``: ``convert_char_to_pinyin``, ``get_tokenizer``,
``list_str_to_idx``) turns a text into tokens and the tokens into the line numbers of its
``vocab.txt``: characters, except that Chinese characters become tone-numbered pinyin
syllables (pypinyin ``Style.TONE3`` with tone sandhi) after word segmentation by rjieba;
a few punctuation marks are folded first (``;`` to ``,``, curly quotes to straight ones),
a space separates a multi-letter Latin run from what precedes it and precedes each
Chinese syllable. A token missing from the vocabulary gets F5's index 0 (its first line,
a space), and batches are padded with -1.

flowkit's ids are F5's indices plus one: id 0 is padding (F5's -1; both select row 0 of
F5's embedding, its filler), id 1 is F5's index 0 (also its unknown), and ``vocab.txt``
line ``k`` is id ``k + 1``. The embedding table therefore has ``len(vocab) + 1`` rows in
both projects, row for row the same.

Why own code: F5-TTS ships no installable tokenizer package (its ``f5_tts`` package
imports its trainer, datasets and vocoders); the segmenter and the pinyin conversion are
the libraries F5 uses (rjieba, pypinyin). ``tests/interop/test_f5_text.py`` compares the
ids with F5's own functions on mixed Chinese / Latin texts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import ConfigError
from flowkit.registry import register
from flowkit.text.base import UNKNOWN_ID

# F5's own index 0 (its unknown token) is flowkit's UNKNOWN_ID; flowkit's ids are F5's + 1

_FOLD = str.maketrans({";": ",", "\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})


def _is_chinese(c: str) -> bool:
    return "\u3100" <= c <= "\u9fff"


def _pinyin(text: str) -> list[str]:
    from pypinyin import Style, lazy_pinyin

    return lazy_pinyin(text, style=Style.TONE3, tone_sandhi=True)


def f5_tokens(text: str, *, pinyin: bool = True) -> list[str]:
    """The tokens F5-TTS makes of ``text`` (``pinyin=False``: its "char" tokenizer, one
    token per character)."""
    if not pinyin:
        return list(text)
    import rjieba

    tokens: list[str] = []
    for seg in rjieba.cut(text.translate(_FOLD)):
        width = len(seg.encode("utf-8"))
        if width == len(seg):  # letters, digits and ASCII punctuation only
            if tokens and width > 1 and tokens[-1] not in " :'\"":
                tokens.append(" ")
            tokens.extend(seg)
        elif width == 3 * len(seg):  # only three-byte characters (CJK and more)
            syllables = _pinyin(seg)
            for c, syllable in zip(seg, syllables, strict=False):
                if _is_chinese(c):
                    tokens.append(" ")
                tokens.append(syllable)
        else:
            for c in seg:
                if ord(c) < 256:
                    tokens.append(c)
                elif _is_chinese(c):
                    tokens.append(" ")
                    tokens.extend(_pinyin(c))
                else:
                    tokens.append(c)
    return tokens


def read_vocab_file(path: str | Path) -> tuple[str, ...]:
    """The tokens of an F5 ``vocab.txt`` (one per line, the line number is F5's index).

    Raises:
        ConfigError: the file is missing, empty or not UTF-8.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the F5 vocabulary ({exc}); give F5-TTS's vocab.txt") from None
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    if not lines:
        raise ConfigError(f"{path}: the F5 vocabulary is empty; give F5-TTS's vocab.txt")
    return tuple(lines)


@attrs.define
class F5Vocab:
    """F5-TTS tokens -> flowkit ids (0 pad, ``k + 1`` for vocab.txt line ``k``).

    ``unknown_count`` counts tokens `encode` did not find (they become id 1, F5's index 0).
    """

    tokens: tuple[str, ...]
    pinyin: bool = True
    unknown_count: int = 0
    _index: dict[str, int] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        # a token on two lines keeps the later one, as F5's dict comprehension does
        self._index = {token: i + 1 for i, token in enumerate(self.tokens)}

    @property
    def size(self) -> int:
        """Number of ids, padding included: F5's embedding rows (``len(vocab) + 1``)."""
        return len(self.tokens) + 1

    def tokenize(self, text: str) -> list[str]:
        """F5's tokens of ``text``."""
        return f5_tokens(text, pinyin=self.pinyin)

    def encode(self, text: str) -> list[int]:
        """Ids ``[nt]`` of ``text``; tokens not in the vocabulary become 1 (counted)."""
        tokens = self.tokenize(text)
        self.unknown_count += sum(1 for t in tokens if t not in self._index)
        return [self._index.get(t, UNKNOWN_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids`` (tokens joined); padding is dropped."""
        return "".join(self.tokens[i - 1] for i in ids if 1 <= i <= len(self.tokens))

    def missing(self, texts: Iterable[str]) -> list[str]:
        """Tokens of ``texts`` the vocabulary lacks, in first-seen order."""
        seen: dict[str, None] = {}
        for text in texts:
            for token in self.tokenize(text):
                if token not in self._index:
                    seen.setdefault(token, None)
        return list(seen)

    def extended(self, tokens: Sequence[str]) -> F5Vocab:
        """This vocabulary with ``tokens`` appended (new ids after the old ones, which keep theirs)."""
        return F5Vocab(self.tokens + tuple(tokens), pinyin=self.pinyin)

    def state_dict(self) -> dict[str, Any]:
        """JSON-able ``{"kind": "f5", "tokens": [...], "pinyin": bool}``."""
        return {"kind": "f5", "tokens": list(self.tokens), "pinyin": self.pinyin}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> F5Vocab:
        """The vocabulary saved by `state_dict`.

        Raises:
            ValueError: ``state`` is not an F5 vocabulary.
        """
        if state.get("kind") != "f5" or not isinstance(state.get("tokens"), list):
            raise ValueError("not an F5 vocabulary state (expected kind 'f5' and a tokens list)")
        return cls(tuple(state["tokens"]), pinyin=bool(state.get("pinyin", True)))


@register("text", "f5")
@attrs.frozen
class F5FrontEnd:
    """F5-TTS's tokenizer: ``vocab.txt`` tokens, Chinese as pinyin (`f5_tokens`).

    ``build_vocab`` (training from scratch) starts from ``vocab_file`` when given, else
    from a space (F5 requires it at index 0), and appends every token of the texts it
    lacks, so no character of the data is silently mapped to the unknown id.
    """

    vocab_file: str | None = None  # F5-TTS's vocab.txt; None: built from the texts
    pinyin: bool = True  # False: F5's "char" tokenizer (no pinyin conversion)

    def build_vocab(self, texts: Iterable[str]) -> F5Vocab:
        """The vocabulary of ``vocab_file`` (or a space) plus the texts' missing tokens."""
        base = F5Vocab(read_vocab_file(self.vocab_file) if self.vocab_file else (" ",), pinyin=self.pinyin)
        return base.extended(base.missing(texts))
