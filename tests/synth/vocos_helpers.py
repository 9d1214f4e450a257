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
    torch.save({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()},
               directory / "pytorch_model.bin")
    return directory


def write_tiny_release(directory: Path, *, dim: int = 32, intermediate_dim: int = 96, num_layers: int = 2,
                       seed: int = 5) -> Path:
    """A small random-weight Vocos in the published layout that decodes encoder.vocos_mel.

    The published config.yaml with a smaller backbone; the state dict has the module's
    names plus the reference feature extractor's two buffers (names and shapes from the
    published fixture), as the reference's ``torch.save(model.state_dict())`` writes them.
    """
    from flowkit.synth.vocos import VocosNet, read_config

    text = fixture("published")["config_yaml"]
    for key, old, new in (("dim", 512, dim), ("intermediate_dim", 1536, intermediate_dim),
                          ("num_layers", 8, num_layers)):
        text = text.replace(f"    {key}: {old}\n", f"    {key}: {new}\n")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.yaml").write_text(text, encoding="utf-8")
    shapes = {k: list(v.shape) for k, v in VocosNet(read_config(directory / "config.yaml")).state_dict().items()}
    shapes.update({k: v for k, v in fixture("published")["shapes"].items() if k.startswith("feature_extractor.")})
    state = _tool().seeded_state(shapes, seed)
    return write_release(directory, state=state, config_text=text)
