"""Fixtures of the model tests (helpers live in model_fixtures.py: a module named
``conftest`` is ambiguous to import when several test folders have one)."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import Item, make_item


@pytest.fixture
def items() -> list[Item]:
    return [make_item(40, 5, seed=1), make_item(23, 3, seed=2), make_item(31, 4, seed=3)]


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """These tiny models run fastest on one thread; on a shared, loaded CPU two OpenMP
    threads spin-wait on each other and a 10 ms step takes a second. Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
