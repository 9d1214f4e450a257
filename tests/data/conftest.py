"""Fixtures for the data tests: tiny synthetic corpora written with numpy + soundfile."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth_audio import make_corpus


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    make_corpus(root)
    return root


@pytest.fixture
def quiet_prepare():
    """prepare_store with the progress display off and one in-process worker."""
    from flowkit.data.prepare import prepare_store

    def run(inputs, out, **kwargs):
        kwargs.setdefault("progress", False)
        kwargs.setdefault("workers", 1)
        return prepare_store([Path(p) for p in inputs], Path(out), **kwargs)

    return run
