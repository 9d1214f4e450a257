"""A 20-clip store of real speech (the bundled allison English clips), prepared once per module."""

from __future__ import annotations

from pathlib import Path

import pytest
from align_data import make_store


@pytest.fixture(scope="module")
def store20(tmp_path_factory) -> Path:
    return make_store(tmp_path_factory.mktemp("align"), long_text_clip=True)
