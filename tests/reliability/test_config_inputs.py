"""Odd gin inputs are read or refused in one line: a UTF-8 byte order mark, a bare word
where a value belongs (``nan``), a value nested thousands deep, and a FIFO given as the
config file (refused unread: a read would block)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from reliability_helpers import DEBUG_GIN

from flowkit import config
from flowkit.errors import ConfigError


def test_a_byte_order_mark_is_read_as_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bom.gin"
    path.write_bytes(b"\xef\xbb\xbf" + f"include '{DEBUG_GIN}'\nTrainer.steps = 3\n".encode())
    assert "Trainer.steps = 3" in config.parse([path]).text


@pytest.mark.parametrize("value, fragments", [
    ("nan", ("bad.gin:2", "not a gin value", "`Trainer.lr = nan`", "gin has no nan")),
    ("[" * 5000 + "]" * 5000, ("bad.gin", "nested deeper than gin can read", "write the value flat")),
])
def test_a_value_gin_cannot_read_is_one_line(value: str, fragments: tuple[str, ...], tmp_path: Path) -> None:
    path = tmp_path / "bad.gin"
    path.write_text(f"include '{DEBUG_GIN}'\nTrainer.lr = {value}\n")
    with pytest.raises(ConfigError) as info:
        config.parse([path])
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_a_fifo_given_as_the_config_is_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "exp.gin"
    os.mkfifo(fifo)  # nothing writes to it: opening it for reading would block
    with pytest.raises(ConfigError, match=r"exp.gin.*is not a regular file; give a .gin file"):
        config.parse([fifo])
