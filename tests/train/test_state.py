"""Checkpoint files, EMA, random streams and the run lock, without training."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch

from flowkit.checkpoints import files as checkpoint
from flowkit.errors import CheckpointError, TrainingError
from flowkit.train.ema import EMA
from flowkit.train.randomness import RandomStreams, derive_seed, eval_generators, seed_globals
from flowkit.train.workspace import RunLock


def _save(root, step, keep_last=None):
    model = torch.nn.Linear(3, 2)
    return checkpoint.save_checkpoint(root, step, {"model": model.state_dict()}, {"note": step}, keep_last=keep_last)


def test_keep_last_prunes_after_commit(tmp_path) -> None:
    for step in (1, 2, 3, 4):
        _save(tmp_path, step, keep_last=2)
    assert [s for s, _ in checkpoint.list_checkpoints(tmp_path)] == [3, 4]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("damage", ["truncate", "flip", "no_marker"])
def test_a_damaged_newest_checkpoint_falls_back(tmp_path, damage) -> None:
    _save(tmp_path, 1)
    newest = _save(tmp_path, 2)
    state = newest / "state.pt"
    if damage == "truncate":
        state.write_bytes(state.read_bytes()[:50])
    elif damage == "flip":
        data = bytearray(state.read_bytes())
        data[len(data) // 2] ^= 0xFF
        state.write_bytes(bytes(data))
    else:
        (newest / "COMPLETE").unlink()
    found, skipped = checkpoint.find_latest(tmp_path)
    assert found is not None and found.name == "step-00000001"
    assert skipped[0][0] == newest
    with pytest.raises(CheckpointError, match="step-00000002"):
        checkpoint.load_checkpoint(newest)


def test_strict_loading_names_the_key(tmp_path) -> None:
    path = _save(tmp_path, 1)
    state = checkpoint.load_checkpoint(path).state["model"]
    with pytest.raises(CheckpointError, match="key 'bias' is missing"):
        checkpoint.load_strict(torch.nn.Linear(3, 2), {"weight": state["weight"]}, what="model", source=path)
    with pytest.raises(CheckpointError, match="key 'extra' is unexpected"):
        checkpoint.load_strict(torch.nn.Linear(3, 2), {**state, "extra": torch.zeros(1)}, what="model", source=path)
    with pytest.raises(CheckpointError, match="has shape"):
        checkpoint.load_strict(torch.nn.Linear(4, 2), state, what="model", source=path)


def test_ema_warmup_follows_the_tf_rule() -> None:
    model = torch.nn.Linear(2, 1)
    ema = EMA(model, decay=0.999)
    decays = []
    for _ in range(3):
        decays.append(ema.current_decay())
        ema.update(model)
    assert decays == pytest.approx([1 / 10, 2 / 11, 3 / 12])
    ema.num_updates = 10**6
    assert ema.current_decay() == 0.999


def test_ema_update_and_swap() -> None:
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    ema = EMA(model, decay=0.5, warmup=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update(model)
    assert torch.allclose(ema.shadow["weight"], torch.full((1, 2), 0.5))
    with ema.swapped_in(model):
        assert torch.allclose(model.weight, torch.full((1, 2), 0.5))
    assert torch.allclose(model.weight, torch.ones(1, 2))


def test_streams_capture_and_restore_every_generator() -> None:
    seed_globals(7)
    streams = RandomStreams.create(7)
    saved = streams.capture()
    first = (streams.data.random(3), torch.rand(3, generator=streams.flow), random.random(), np.random.rand(),
             torch.rand(1))
    streams.restore(saved)
    again = (streams.data.random(3), torch.rand(3, generator=streams.flow), random.random(), np.random.rand(),
             torch.rand(1))
    assert np.array_equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert first[2:4] == again[2:4] and torch.equal(first[4], again[4])


def test_streams_are_independent_and_reproducible() -> None:
    assert derive_seed(0, "data") != derive_seed(0, "flow") != derive_seed(1, "flow")
    assert derive_seed(0, "data", rank=1) != derive_seed(0, "data")
    a, b = eval_generators(3, "val"), eval_generators(3, "val")
    assert a[0].random() == b[0].random() and torch.equal(torch.rand(2, generator=a[1]), torch.rand(2, generator=b[1]))


def test_lock_refuses_a_live_holder_and_takes_over_a_dead_one(tmp_path) -> None:
    path = tmp_path / "run.lock"
    with RunLock.acquire(path):
        with pytest.raises(TrainingError, match="in use by pid"):
            RunLock.acquire(path)
    assert not path.exists()
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    dead = finished.pid
    path.write_text(json.dumps({"pid": dead, "host": socket.gethostname()}))
    lock = RunLock.acquire(path)
    assert lock.took_over["pid"] == dead
    lock.release()
