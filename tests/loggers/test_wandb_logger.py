"""wandb logger: an offline run directory with the logged history; missing package."""

from __future__ import annotations

import pytest

from flowkit.errors import ConfigError
from flowkit.loggers.wandb import WandbLogger


@pytest.fixture
def offline_env(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")


def test_offline_run_written_inside_run_dir(tmp_path, offline_env):
    pytest.importorskip("wandb")
    logger = WandbLogger(project="flowkit-test", name="unit")
    logger.open(tmp_path, resumed=False, total_steps=3, start_step=0)
    for step in (1, 2, 3):
        logger.log({"kind": "train", "step": step, "loss": 1.0 / step})
    logger.close()
    runs = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0
    run_id = (tmp_path / "wandb" / "flowkit_run_id").read_text().strip()
    assert runs[0].name == f"run-{run_id}.wandb"


def test_missing_package_is_config_error(tmp_path, monkeypatch, hide_package):
    logger = WandbLogger()
    hide_package("wandb")
    with pytest.raises(ConfigError, match=r"pip install 'flowkit\[wandb\]'"):
        logger.open(tmp_path, resumed=False, total_steps=1, start_step=0)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(ConfigError, match=r"flowkit\[wandb\]"):
        WandbLogger()


def test_bad_mode():
    with pytest.raises(ConfigError, match="mode='cloud'"):
        WandbLogger(mode="cloud")
