"""Shared fixtures: the full real corpus (skipped when absent) and a clean gin state."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "data" / "asterisk-5voice"


@pytest.fixture
def corpus_dir() -> Path:
    """The full asterisk-5voice corpus next to the clone; skipped for a clone without it."""
    if not (CORPUS / "metadata.csv").is_file():
        pytest.skip(f"full corpus not found at {CORPUS} (only the bundled demo ships with the repo)")
    return CORPUS


@pytest.fixture(autouse=True)
def _clean_gin():
    """gin is global state: each test starts and ends with an empty config."""
    import gin

    gin.clear_config()
    yield
    gin.clear_config()
