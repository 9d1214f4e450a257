"""Random-weight Vocos release directories in the published layout, from the fixtures' seeds.

The fixtures (``fixtures/vocos_<name>.npz``, written once by ``tools/vocos_fixtures.py``
from the reference code) carry the config text, the seed and the state dict's names and
shapes; `write_release` draws the same weights with the tool's own `seeded_state` and
saves them with ``torch.save`` as ``pytorch_model.bin`` beside ``config.yaml``.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tool() -> Any:
    return _module("vocos_fixtures", REPO / "tools" / "vocos_fixtures.py")


def report_helpers() -> Any:
    """tests/report/report_helpers.py (synthetic run directories, the tone store, debug.gin)."""
    return _module("report_helpers", REPO / "tests" / "report" / "report_helpers.py")


def fixture(name: str) -> dict[str, Any]:
    """The arrays of ``fixtures/vocos_<name>.npz`` (``shapes`` decoded from JSON)."""
    with np.load(FIXTURES / f"vocos_{name}.npz") as data:
        out = {k: data[k] for k in data.files}
    out["shapes"] = json.loads(str(out["shapes"]))
    out["config_yaml"] = str(out["config_yaml"])
    return out


def seeded_state(name: str) -> dict[str, np.ndarray]:
    """The fixture's weights, redrawn here; checked against the fixture's checksum."""
    tool = _tool()
    fx = fixture(name)
    state = tool.seeded_state(fx["shapes"], int(fx["seed"]))
    assert abs(tool.checksum(state) - float(fx["checksum"])) <= 1e-6 * float(fx["checksum"]), (
        "seeded_state no longer draws the fixture's weights"
    )
    return state


def write_release(directory: Path, name: str = "published", *, state: dict[str, np.ndarray] | None = None,
                  config_text: str | None = None) -> Path:
    """A Vocos release directory (config.yaml + pytorch_model.bin) with the fixture's weights."""
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    fx = fixture(name)
    state = seeded_state(name) if state is None else state
    (directory / "config.yaml").write_text(fx["config_yaml"] if config_text is None else config_text, encoding="utf-8")
    torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, directory / "pytorch_model.bin")
    return directory
