"""gin glue: includes, binding order, error lines, type checks and the config diff."""

from __future__ import annotations

import gin
import pytest

from flowkit import config
from flowkit.errors import ConfigError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_include_resolves_against_the_including_file(tmp_path, monkeypatch):
    write(tmp_path / "exp" / "base.gin", "schedule.flow_matching.sigma_min = 0.1\n")
    exp = write(tmp_path / "exp" / "e1.gin", "include 'base.gin'\nt_sampler.logit_normal.std = 0.5\n")
    monkeypatch.chdir(tmp_path.parent)  # far from the files
    parsed = config.parse([exp])
    assert [p for p, _ in parsed.sources] == [str(tmp_path / "exp" / "base.gin"), str(exp)]
    text = config.config_text()
    assert "schedule.flow_matching.sigma_min = 0.1" in text


def test_bindings_come_last(tmp_path):
    exp = write(tmp_path / "e.gin", "schedule.flow_matching.sigma_min = 0.1\n")
    config.parse([exp], ["schedule.flow_matching.sigma_min = 0.2"])
    assert gin.query_parameter("schedule.flow_matching.sigma_min") == 0.2


def test_syntax_error_names_file_and_line(tmp_path):
    base = write(tmp_path / "base.gin", "# header\n\nschedule.flow_matching.sigma_min = 0.1 0.2\n")
    exp = write(tmp_path / "e.gin", "include 'base.gin'\n")
    with pytest.raises(ConfigError,
                       match=rf"^{base}:3: gin syntax error.*`schedule.flow_matching.sigma_min = 0.1 0.2`"):
        config.parse([exp])


def test_unclosed_bracket_names_file_and_statement(tmp_path):
    exp = write(tmp_path / "e.gin", "schedule.flow_matching.sigma_min = 0.1\nloss.masked_mse.weight = (1.0,\n")
    with pytest.raises(ConfigError, match=rf"^{exp}:2: gin syntax error.*unclosed"):
        config.parse([exp])


def test_missing_include_is_one_line_with_the_file(tmp_path):
    exp = write(tmp_path / "e.gin", "include 'bsae.gin'\n")
    write(tmp_path / "base.gin", "\n")
    with pytest.raises(ConfigError, match=rf"^{exp}:1: config file 'bsae.gin' not found \(did you mean 'base.gin'"):
        config.parse([exp])


def test_include_cycle_is_refused(tmp_path):
    write(tmp_path / "a.gin", "include 'b.gin'\n")
    write(tmp_path / "b.gin", "include 'a.gin'\n")
    with pytest.raises(ConfigError, match="include cycle"):
        config.parse([tmp_path / "a.gin"])


def test_wrong_type_is_refused_at_parse_time():
    with pytest.raises(ConfigError, match=r"schedule.flow_matching.sigma_min = 'small': expected float, got str"):
        config.parse((), ["schedule.flow_matching.sigma_min = 'small'"])


def test_locked_config_refuses_more_bindings():
    config.parse((), ["schedule.flow_matching.sigma_min = 0.1"], finalize=True)
    with pytest.raises(ConfigError, match="config is locked"):
        config.parse((), ["schedule.flow_matching.sigma_min = 0.2"], clear=False)


def test_config_diff_splits_by_allow_list():
    old = ("Trainer.steps = 100\nTrainer.lr = 0.001\nlogger.console.every = 10\n"
           "Trainer.losses = [\n    @loss.masked_mse(),\n]\n")
    new = "Trainer.steps = 200\nTrainer.lr = 0.002\nlogger.console.every = 5\nTrainer.losses = [@loss.masked_mse()]\n"
    diff = config.config_diff(old, new, allow=["Trainer.steps", "logger.*"])
    assert set(diff.allowed) == {"Trainer.steps", "logger.console.every"}
    assert diff.refused == {"Trainer.lr": ("0.001", "0.002")}
    assert not diff.ok
    assert diff.describe() == "Trainer.lr: 0.001 -> 0.002"


def test_config_diff_sees_added_and_removed_bindings():
    diff = config.config_diff("a.b = 1\n", "a.b = 1\nc.d = 2\n")
    assert diff.refused == {"c.d": (None, "2")}
    assert config.config_diff("a.b = 1\n", "a.b = 1\n").ok
