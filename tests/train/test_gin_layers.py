"""gin in layers (t5x): a run contract with required values, size overlays that only size
and compose with any experiment in any order, experiments that change one idea.

- gin/base.gin binds ``DATA = %gin.REQUIRED``: a config that leaves it unset fails at
  parse time naming it and the fix (production.gin never trains on the demo store);
- each file applies once, where it is first included, so an overlay's own
  ``include 'base.gin'`` after an experiment resets nothing of it;
- every value base.gin writes out equals the code default.
"""

from __future__ import annotations

import re
from pathlib import Path

import gin
import pytest
from train_helpers import TINY

from flowkit import config
from flowkit.errors import ConfigError

GIN = Path(__file__).resolve().parents[2] / "gin"
EXPERIMENTS = ("e11_aligned.gin", "e12_cross_prompt.gin", "e13_dur_emotion.gin")
OVERLAYS = ("debug.gin", "cpu.gin", "smoke.gin", "production.gin")
#: What a size overlay may bind: the model preset, the budget, the step count and the
#: optimisation that goes with a size, evaluation/saving/logging cadence, and a preset's data.
SIZE_KEYS = {
    "model.dit.preset", "batch_sampler.frame_budget.frame_budget", "batch_sampler.frame_budget.max_items",
    "batch_sampler.frame_budget.cost", "Trainer.steps", "Trainer.lr", "lr_schedule.warmup_cosine.warmup_updates",
    "Trainer.ema_decay", "Trainer.eval_every", "Trainer.eval_batches", "Trainer.save_every", "Trainer.keep_last",
    "Trainer.log_every", "DATA",
}
_BINDING = re.compile(r"^([\w./]+)\s*=", re.MULTILINE)


def test_production_without_data_fails_at_parse_time_naming_the_value() -> None:
    with pytest.raises(ConfigError, match=r"Trainer.data = %DATA is required .*--data STORE"):
        config.parse([GIN / "production.gin"])
    config.parse([GIN / "production.gin"], ["Trainer.data = ['/stores/a.zarr']"])  # --data sets it


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_an_experiment_without_data_names_data(experiment: str) -> None:
    with pytest.raises(ConfigError, match="DATA"):
        config.parse([GIN / experiment])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_size_overlays_only_size(overlay: str) -> None:
    text = (GIN / overlay).read_text(encoding="utf-8")
    assert set(_BINDING.findall(text)) <= SIZE_KEYS, set(_BINDING.findall(text)) - SIZE_KEYS


@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_and_experiment_compose_in_any_order(experiment: str, overlay: str) -> None:
    data = ["DATA = ['/stores/a.zarr']"]
    config.parse([GIN / experiment, GIN / overlay], data)
    after = config.config_text()
    config.parse([GIN / overlay, GIN / experiment], data)
    assert config.config_text() == after
    config.parse([GIN / experiment], data)
    for line in config.config_text().splitlines():  # nothing the experiment sets is reset
        key = line.split(" = ")[0]
        if " = " in line and key not in SIZE_KEYS:
            assert line in after.splitlines(), line


def test_base_gin_restates_the_code_defaults() -> None:
    from flowkit.train.settings import Trainer

    config.parse([GIN / "base.gin"], ["DATA = []"])
    written = Trainer()
    gin.clear_config()
    assert written == Trainer(), "gin/base.gin binds a value that is not the code default"


def test_e11_with_debug_keeps_the_aligned_text_path(tiny_store: Path, tmp_path: Path) -> None:
    from flowkit.train import run

    out = tmp_path / "e11-debug"
    run.train([GIN / "e11_aligned.gin", GIN / "debug.gin"], list(TINY), data=[tiny_store], out=out, steps=1,
              device="cpu")
    saved = (out / "config.gin").read_text(encoding="utf-8")
    assert "model.dit.text_path = 'aligned'" in saved
    assert "@loss.duration_l1()" in saved
    assert "model.dit.preset = 'tiny'" in saved
