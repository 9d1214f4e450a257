"""The fixture comparisons hold under two CPU code paths, not only the one CI happens to get.

``tools/isa_check.py`` measures the log-mel, F5 velocity and Vocos fixtures in a fresh
process per setting; here two of them run: ATen's portable kernels on one thread
(``ATEN_CPU_CAPABILITY=default``) and the machine's own best kernels on two. Each must be
within the bars of ``tests/numerics.py``, and the two processes must really have run
different kernels (else the check proves nothing on this machine).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "isa_check.py"


def _tool():
    spec = importlib.util.spec_from_file_location("isa_check", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_fixtures_hold_under_two_isa_settings() -> None:
    tool = _tool()
    measured = {name: tool.run_setting(name) for name in ("default-1t", "native-2t")}
    assert measured["default-1t"]["cpu_capability"] == "DEFAULT"
    # the thread count may be capped by the CPUs this process may use (a pytest-xdist worker)
    assert measured["default-1t"]["threads"] == 1
    if measured["native-2t"]["cpu_capability"] == "DEFAULT":
        pytest.skip("this CPU has no vectorised ATen path: both settings run the same kernels")
    for name, m in measured.items():
        print(name, m)
        for key, bar in tool.bars().items():
            assert float(m[key]) <= bar, f"{name}: {key} {m[key]} above {bar}"
