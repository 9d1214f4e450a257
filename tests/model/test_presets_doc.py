"""docs/models.md carries the generated parameter table, and f5_base matches F5-TTS base."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowkit.model.dit import DiTConfig
from flowkit.model.sizes import count_parameters, parameter_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"
#: Parameters of F5-TTS base as its paper reports them.
F5_BASE_PARAMS = 336_000_000


def test_docs_table_is_current():
    assert parameter_table() in DOC.read_text(encoding="utf-8"), "run: python tools/model_table.py"


@pytest.mark.parametrize("kw", [{}, {"text_path": "aligned", "dur_cond": "emotion"}])
def test_f5_base_is_within_5_percent_of_336m(kw):
    n = count_parameters(DiTConfig(preset="f5_base", **kw))
    assert abs(n - F5_BASE_PARAMS) / F5_BASE_PARAMS < 0.05, n


def test_small_preset_is_cpu_sized():
    assert 1e6 < count_parameters(DiTConfig(preset="small"), vocab_size=64) < 10e6
