"""Each judge names the wheel it runs on, and a missing package is one line naming the extra."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import numpy as np
import pytest

from flowkit import registry
from flowkit.errors import ConfigError

# (kind, name, the import that fails, the package `unavailable` looks for, its wheel, what the
#  model field holds, the call that needs the package)
JUDGES = [
    pytest.param("quality", "dnsmos", "speechmos", "onnxruntime", "speechmos", "P.835",
                 lambda judge: judge.score(np.ones(1600, np.float32), 16000), id="quality.dnsmos"),
    pytest.param("speaker", "resemblyzer", "resemblyzer", "resemblyzer", "resemblyzer", "pretrained.pt",
                 lambda judge: judge.embed(np.ones(1600, np.float32), 16000), id="speaker.resemblyzer"),
]


@pytest.mark.parametrize(("kind", "name", "module", "needed", "wheel", "model", "use"), JUDGES)
def test_describe_names_the_wheel(kind, name, module, needed, wheel, model, use) -> None:
    registry.load_plugins()
    info = registry.build(kind, name).describe()
    assert info["name"] == f"{kind}.{name}" and model in info["model"]
    assert info["version"] == f"{wheel} {importlib.metadata.version(wheel)}"


@pytest.mark.parametrize(("kind", "name", "module", "needed", "wheel", "model", "use"), JUDGES)
def test_a_missing_package_is_one_line_naming_the_extra(monkeypatch, hide_package, kind, name, module, needed,
                                                        wheel, model, use) -> None:
    from flowkit import judges

    real_spec = importlib.util.find_spec
    registry.load_plugins()
    fresh = registry.build(kind, name)
    hide_package(module)
    with pytest.raises(ConfigError,
                       match=rf"^{kind}.{name} needs the {module} package .*pip install 'flowkit\[eval\]'$"):
        use(fresh)
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == needed else real_spec(n, *a))
    assert judges.unavailable(kind) == f"{kind}.{name} needs {needed}: pip install 'flowkit[eval]'"
    from flowkit.judges.panel import build_judges

    panel = build_judges("pocketsphinx", **{kind: True, ("speaker" if kind == "quality" else "quality"): None})
    assert getattr(panel, kind) is None  # the default judge is left out
    assert panel.notes == [f"no {'DNSMOS' if kind == 'quality' else 'SIM'}: {judges.unavailable(kind)}"]
