"""tensorboard logger: scalars read back with tensorboard's own reader; missing package."""

from __future__ import annotations

import pytest

from flowkit.errors import ConfigError
from flowkit.loggers.tensorboard import TensorBoardLogger


def _scalars(log_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_scalars_per_numeric_field(tmp_path):
    logger = TensorBoardLogger()
    logger.open(tmp_path, resumed=False, total_steps=3, start_step=0)
    for step in (1, 2, 3):
        logger.log(
            {"kind": "train", "step": step, "loss": 1.0 / step, "lr": 0.1, "note": "x", "ok": True}
        )
    logger.log({"kind": "eval", "step": 3, "val_loss": 0.5})
    logger.close()
    scalars = _scalars(tmp_path / "tensorboard")
    assert set(scalars) == {"train/loss", "train/lr", "eval/val_loss"}
    assert [s for s, _ in scalars["train/loss"]] == [1, 2, 3]
    assert scalars["train/loss"][1][1] == pytest.approx(0.5)
    assert scalars["eval/val_loss"] == [(3, 0.5)]


def test_missing_package_is_config_error(tmp_path, monkeypatch, hide_package):
    logger = TensorBoardLogger()
    hide_package("tensorboard", "torch.utils.tensorboard")
    with pytest.raises(ConfigError, match=r"pip install 'flowkit\[tensorboard\]'"):
        logger.open(tmp_path, resumed=False, total_steps=1, start_step=0)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(ConfigError, match=r"flowkit\[tensorboard\]"):
        TensorBoardLogger()
