"""gin messages that name the right fix and the right place.

Through the real CLI (the Typer app in-process: the same one ``error:`` line and exit
code as a shell). Each case checks:

- ``Trainer.lr = %gin.REQUIRED`` suggests its own binding (``-b "Trainer.lr = ..."``), not
  ``-b "gin.REQUIRED = ..."``;
- an undefined macro is named with how to define it, not as ``macro() missing 1 required
  positional argument``;
- an out-of-range or wrong-type value names its file and line;
- a file given twice (``debug.gin cpu.gin debug.gin``) is refused, not silently applied once;
- ``flowkit config`` asks for ``--data STORE`` and takes ``--data``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reliability_helpers import DEBUG_GIN, REPO, invoke_in_process, one_error_in_process

from flowkit.errors import ConfigError, DataError


def _gin(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.gin"
    path.write_text(f"include '{DEBUG_GIN}'\n# a comment line\n{body}\n", encoding="utf-8")
    return path


def test_a_required_value_suggests_its_own_binding(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    path = _gin(tmp_path, "Trainer.lr = %gin.REQUIRED")
    line = one_error_in_process(["config", path], capfd, ConfigError.exit_code, f"{path}:3",
                                "Trainer.lr = %gin.REQUIRED", '-b "Trainer.lr = ..."')
    assert "gin.REQUIRED = ..." not in line


def test_an_undefined_macro_is_named_with_how_to_define_it(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    path = _gin(tmp_path, "MY_LR = 1e-3\nTrainer.lr = %MY_LRR")
    line = one_error_in_process(["config", path], capfd, ConfigError.exit_code, f"{path}:4", "macro MY_LRR",
                      "not defined", "did you mean 'MY_LR'", '-b "MY_LRR = ..."')
    assert "positional argument" not in line


def test_an_undefined_macro_inside_a_list_is_named(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    path = _gin(tmp_path, "Trainer.betas = (%BETA1, 0.99)")
    one_error_in_process(["config", path], capfd, ConfigError.exit_code, f"{path}:3", "macro BETA1", "not defined")


def test_an_out_of_range_value_names_its_file_and_line(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    path = _gin(tmp_path, "Trainer.lr = -1.0")
    one_error_in_process(["config", path], capfd, ConfigError.exit_code, f"{path}:3: Trainer.lr = -1.0", "must be > 0")


def test_an_out_of_range_component_value_names_its_file_and_line(tmp_path: Path,
                                                                 capfd: pytest.CaptureFixture) -> None:
    path = _gin(tmp_path, "\nschedule.flow_matching.sigma_min = -1.0")
    one_error_in_process(["config", path], capfd, ConfigError.exit_code, f"{path}:4: schedule.flow_matching.sigma_min")


def test_an_out_of_range_binding_names_the_binding(capfd: pytest.CaptureFixture) -> None:
    one_error_in_process(["config", DEBUG_GIN, "-b", "Trainer.lr = -2.0"], capfd, ConfigError.exit_code,
               '-b "Trainer.lr = -2.0": Trainer.lr = -2.0', "must be > 0")


def test_a_wrong_type_names_its_file_and_line(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    path = _gin(tmp_path, "model.dit.depth = 'deep'")
    one_error_in_process(["config", path], capfd, ConfigError.exit_code, f"{path}:3: model.dit.depth = 'deep'",
                         "expected int")


def test_a_size_overlay_given_twice_is_refused(capfd: pytest.CaptureFixture) -> None:
    gin = REPO / "gin"
    one_error_in_process(["config", gin / "debug.gin", gin / "cpu.gin", gin / "debug.gin"], capfd,
                         ConfigError.exit_code, "debug.gin is given twice", "give it once")


def test_a_file_an_earlier_one_included_is_refused(capfd: pytest.CaptureFixture) -> None:
    gin = REPO / "gin"
    one_error_in_process(["config", gin / "e11_aligned.gin", gin / "base.gin", "-b", "DATA = []"], capfd,
               ConfigError.exit_code, "base.gin is already included by", "e11_aligned.gin")


def test_config_checks_against_the_data_given(store: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    base = REPO / "gin" / "base.gin"
    one_error_in_process(["config", base], capfd, ConfigError.exit_code, "give --data STORE")
    code, out = invoke_in_process(["config", base, "--data", store], capfd)
    assert code == 0, out
    assert "# data: 12 train / 4 val segments" in out and str(store) in out, out
    assert f"Trainer.data = ['{store.resolve()}']" in out, out
    one_error_in_process(["config", base, "--data", tmp_path / "nope.zarr"], capfd, DataError.exit_code,
                         "no such store")
    one_error_in_process(["config", base, "--data", store, "--data", store], capfd, DataError.exit_code, "same store")
