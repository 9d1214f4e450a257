"""text.f5 against F5-TTS's own tokenizer (``convert_char_to_pinyin`` + ``list_str_to_idx``
with its released vocab.txt), from ``tests/fixtures/f5/tokenizer.json`` (tools/f5_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowkit.text.base import PAD_ID
from flowkit.text.f5 import F5FrontEnd, F5Vocab, f5_tokens
from flowkit.text.vocabs import vocab_from_state_dict

FIXTURE = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "f5" / "tokenizer.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("index", range(len(FIXTURE["texts"])))
def test_tokens_and_ids_equal_f5s(index: int) -> None:
    text = FIXTURE["texts"][index]
    assert f5_tokens(text) == FIXTURE["tokens"][index]
    vocab = F5Vocab(tuple(FIXTURE["vocab"]))
    assert vocab.encode(text) == [i + 1 for i in FIXTURE["ids"][index]]


def test_sizes_unknown_and_padding() -> None:
    vocab = F5Vocab(tuple(FIXTURE["vocab"]))
    assert vocab.size == FIXTURE["vocab_size"] + 1  # F5's embedding rows: vocab + filler
    before = vocab.unknown_count
    ids = vocab.encode("\u2603 snowman")
    assert ids[0] == 1 and vocab.unknown_count == before + 1  # F5's index 0 (space) for unknown
    # F5 pads a batch with -1, flowkit with 0: the same embedding row after F5's +1
    rows = [vocab.encode(t) for t in FIXTURE["texts"][:3]]
    width = max(map(len, rows))
    padded = [r + [PAD_ID] * (width - len(r)) for r in rows]
    assert padded == [[i + 1 for i in r] for r in FIXTURE["batch_of_first_three"]]


def test_front_end_extends_instead_of_dropping(tmp_path: Path) -> None:
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("".join(f"{t}\n" for t in FIXTURE["vocab"]), encoding="utf-8")
    vocab = F5FrontEnd(vocab_file=str(vocab_file)).build_vocab(["\u2603 snowman", "你好"])
    assert vocab.tokens[: FIXTURE["vocab_size"]] == tuple(FIXTURE["vocab"])
    assert vocab.tokens[FIXTURE["vocab_size"]:] == ("\u2603",)
    assert vocab.encode("\u2603")[0] == FIXTURE["vocab_size"] + 1
    again = vocab_from_state_dict(vocab.state_dict())
    assert again == vocab and again.encode("你好") == vocab.encode("你好")
    # vocab.txt as F5-TTS reads it (one token per line, newline-terminated), as export-f5 writes it
    written = "".join(f"{t}\n" for t in vocab.tokens)
    assert written == vocab_file.read_text(encoding="utf-8") + "\u2603\n"
