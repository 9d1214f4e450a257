"""Fixtures of the report tests: a tiny log-mel store and a real 4-step debug run on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_helpers import DEBUG_GIN, write_logmel_store


@pytest.fixture(scope="session")
def logmel_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_logmel_store(tmp_path_factory.mktemp("store") / "tones.zarr")


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory, logmel_store: Path) -> Path:
    """A real 4-step run of gin/debug.gin on the tone store (evaluates at steps 0 and 4)."""
    import gin

    from flowkit.train.run import train

    if not DEBUG_GIN.is_file():
        pytest.skip("gin/debug.gin is missing")
    out = tmp_path_factory.mktemp("runs") / "debug"
    try:
        train([DEBUG_GIN], ["Trainer.loggers = []"], data=[logmel_store], out=out, steps=4, device="cpu")
    finally:
        gin.clear_config()
    return out
