"""torch.compile of the DiT's feed-forward runs on the CPU where a C++ compiler exists."""

from __future__ import annotations

import shutil

import pytest
import torch
from model_fixtures import build, collate, make_item

pytestmark = pytest.mark.slow  # compiling takes tens of seconds on 2 cores


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler")
def test_compiled_blocks_train_and_match_eager():
    items = [make_item(n, 3, seed=k) for k, n in enumerate([30, 21])]
    x0, _, cond = collate(items)
    t = torch.tensor([0.3, 0.7])
    eager = build(text_path="unaligned", depth=1).train()
    compiled = build(text_path="unaligned", depth=1).train()
    compiled.compile_blocks()
    assert list(dict(compiled.named_parameters())) == list(dict(eager.named_parameters()))
    for model in (eager, compiled):
        model(x0, t, cond).output.pow(2).sum().backward()
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=name)
