"""Fixtures of the reliability tests (helpers live in reliability_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from reliability_helpers import write_store


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good tiny store (do not modify it: copy it first)."""
    return write_store(tmp_path_factory.mktemp("store") / "tiny.zarr")
