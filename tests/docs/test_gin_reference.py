"""docs/gin-reference.md is generated from the registry and must match it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gin_reference_is_in_sync_with_the_registry():
    env = {**os.environ, "FLOWKIT_NO_PLUGINS": "1", "COLUMNS": "200"}
    out = subprocess.run([sys.executable, "-m", "flowkit", "plugins", "--markdown"], capture_output=True,
                         text=True, cwd=REPO, env=env, check=True).stdout
    committed = (REPO / "docs" / "gin-reference.md").read_text(encoding="utf-8")
    assert out == committed, (
        "docs/gin-reference.md is stale: regenerate it with "
        "`FLOWKIT_NO_PLUGINS=1 .venv/bin/flowkit plugins --markdown > docs/gin-reference.md`"
    )
    assert "### `schedule.flow_matching`" in out and "### `Trainer`" in out


def test_troubleshooting_lists_every_error_message():
    out = subprocess.run([sys.executable, "tools/error_catalog.py", "--check"], capture_output=True, text=True,
                         cwd=REPO)
    assert out.returncode == 0, out.stderr
    page = (REPO / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    assert "### ConfigError (exit code 2)" in page and "### DataError (exit code 3)" in page
