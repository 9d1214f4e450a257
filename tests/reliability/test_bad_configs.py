"""A corpus of broken gin inputs: each one gives ONE clear ``error:`` line naming the
file / field / value, a non-zero exit and no traceback — through the real CLI.

Every case runs in-process through the Typer app (the same ``guarded`` wrapper, fast);
a few run as real subprocesses here and all of them under ``-m slow``. A plugin that
raises on import needs a fresh interpreter, so it always runs as a subprocess with a
fake installed distribution on PYTHONPATH.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from reliability_helpers import DEBUG_GIN, assert_one_clear_line, cli

from flowkit.errors import ConfigError

#: name -> (gin text (None: only bindings), bindings, command, fragments of the one line)
CASES: dict[str, tuple[str | None, tuple[str, ...], str, tuple[str, ...]]] = {
    "misspelled_component": (
        "Trainer.schedule = @schedule.flow_matchin()", (), "config",
        ("bad.gin:2", "'schedule.flow_matchin'", "did you mean 'schedule.flow_matching'"),
    ),
    "unknown_kind": (
        "Trainer.schedule = @schedul.flow_matching()", (), "config", ("bad.gin:2", "schedul.flow_matching"),
    ),
    "misspelled_parameter": (
        "Trainer.schedul = @schedule.flow_matching()", (), "config",
        ("bad.gin:2", "no parameter 'schedul'", "did you mean 'schedule'"),
    ),
    "misspelled_component_parameter": (
        "model.dit.dept = 3", (), "config", ("bad.gin:2", "'dept'", "depth"),
    ),
    "wrong_type": ("Trainer.steps = 'many'", (), "config", ("Trainer.steps = 'many'", "expected int")),
    "wrong_type_in_a_component": ("model.dit.depth = 'deep'", (), "config", ("model.dit.depth", "expected int")),
    "missing_include": ("include 'no_such_base.gin'", (), "config", ("bad.gin:2", "'no_such_base.gin' not found")),
    "syntax_error": ("Trainer.steps = (1,", (), "config", ("bad.gin:2", "syntax error")),
    "bad_binding": (None, ("Trainer.steps =",), "config", ("-b/--binding", "Trainer.steps =")),
    "value_out_of_range": ("Trainer.lr = -1.0", (), "train", ("Trainer.lr = -1", "must be > 0")),
    "unknown_policy": ("Trainer.nonfinite = 'maybe'", (), "train", ("Trainer.nonfinite = 'maybe'", "'stop'", "'skip'")),
    # each of these must fail in `config` with one clear line, not a traceback nor only later in `train`
    "gin_import_of_a_missing_module": (
        "import flowkit_no_such_module", (), "config", ("bad.gin:2", "flowkit_no_such_module", "install"),
    ),
    "out_of_range_in_config": ("Trainer.lr = -1.0", (), "config", ("Trainer.lr = -1", "must be > 0")),
    "out_of_range_component_in_config": ("schedule.flow_matching.sigma_min = -1.0", (), "config", ("sigma_min",)),
    "infinite_lr": ("Trainer.lr = 1e999", (), "config", ("bad.gin:2", "Trainer.lr = inf", "must be > 0 and finite")),
    "negative_weight_decay": ("Trainer.weight_decay = -0.1", (), "config", ("Trainer.weight_decay = -0.1", ">= 0")),
    "zero_flow_loss_weight": ("loss.masked_mse.weight = 0.0", (), "config", ("loss.masked_mse", "weight 0.0", "> 0")),
    "negative_flow_loss_weight": ("loss.masked_mse.weight = -1.0", (), "train", ("loss.masked_mse", "> 0")),
    "wrong_kind_in_a_slot": ("Trainer.schedule = @loss.masked_mse()", (), "config",
                             ("Trainer.schedule = loss.masked_mse is not a schedule",)),
    # values `flowkit config` passed and train then refused (or failed on with no binding named)
    "betas_holding_a_string": ("Trainer.betas = ('a', 0.9)", (), "config",
                               ("bad.gin:2", "Trainer.betas = ('a', 0.9) must be two values in [0, 1)")),
    "cfg_drop_not_a_probability": ("Trainer.cfg_drop = {'both_p': 'x'}", (), "config",
                                   ("bad.gin:2", "both_p = 'x' must be a probability")),
    "malformed_hf_vocoder_path": ("Trainer.vocoder = @vocoder.vocos()\nvocoder.vocos.path = 'hf:/x'", (), "config",
                                  ("bad.gin:3", "vocoder.vocos.path = 'hf:/x'", "not a Hugging Face reference")),
}
FAST_SUBPROCESS = ("misspelled_component", "value_out_of_range")


def _argv(case: str, tmp_path: Path) -> list[str]:
    body, bindings, command, _ = CASES[case]
    config = DEBUG_GIN
    if body is not None:
        config = tmp_path / "bad.gin"
        config.write_text(f"include '{DEBUG_GIN}'\n{body}\n")
    argv = [command, str(config), *(x for b in bindings for x in ("-b", b))]
    if command == "train":
        argv += ["--out", str(tmp_path / "run"), "--device", "cpu"]
    return argv


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_broken_config_gives_one_line_in_process(case: str, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    result = CliRunner().invoke(app, _argv(case, tmp_path))
    assert result.exit_code == ConfigError.exit_code, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    err = capfd.readouterr().err + result.output
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for fragment in CASES[case][3]:
        assert fragment in lines[0], (fragment, lines[0])


def _subprocess_case(case: str, tmp_path: Path) -> None:
    result = cli(*_argv(case, tmp_path))
    assert_one_clear_line(result, *CASES[case][3])
    assert result.returncode == ConfigError.exit_code


@pytest.mark.parametrize("case", FAST_SUBPROCESS)
def test_a_broken_config_gives_one_line_through_the_cli(case: str, tmp_path: Path) -> None:
    _subprocess_case(case, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(set(CASES) - set(FAST_SUBPROCESS)))
def test_every_broken_config_gives_one_line_through_the_cli(case: str, tmp_path: Path) -> None:
    _subprocess_case(case, tmp_path)


def test_binding_to_a_locked_config_is_one_config_error() -> None:
    """gin locks the config once training starts (finalize); a later binding is refused as
    a ConfigError, not gin's RuntimeError."""
    from flowkit import config

    config.parse([DEBUG_GIN], finalize=True)
    with pytest.raises(ConfigError, match="locked") as info:
        config.parse([], ["Trainer.steps = 3"], clear=False)
    assert "\n" not in str(info.value)


def _broken_plugin(site: Path) -> None:
    """An installed distribution ``fkrel-broken`` whose plugin module raises on import."""
    info = site / "fkrel_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fkrel-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[flowkit.plugins]\nloss.broken = fkrel_broken\n")
    (info / "top_level.txt").write_text("fkrel_broken\n")
    (info / "RECORD").write_text("fkrel_broken.py,,\n")
    (site / "fkrel_broken.py").write_text(textwrap.dedent("""
        raise ImportError("fkrel_broken needs libfoo 2.0")
    """))


def test_a_plugin_that_raises_on_import_gives_one_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _broken_plugin(site)
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = cli("config", DEBUG_GIN, PYTHONPATH=path)
    line = assert_one_clear_line(result, "fkrel-broken", "libfoo 2.0")
    assert result.returncode != 0, line
    # The documented way out works: autoload off skips the broken plugin.
    ok = cli("config", DEBUG_GIN, PYTHONPATH=path, FLOWKIT_NO_PLUGINS="1")
    assert ok.returncode == 0, ok.stderr


def _one_line_in_process(argv: list[str], capfd: pytest.CaptureFixture, *fragments: str) -> str:
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    result = CliRunner().invoke(app, argv)
    assert result.exit_code == ConfigError.exit_code, (result.output, result.exception)
    err = capfd.readouterr().err + result.output
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_a_binary_gin_file_is_one_line_with_its_line(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    bad = tmp_path / "binary.gin"
    bad.write_bytes(b"Trainer.steps = 3\n\xff\xfe\x00\x01")
    _one_line_in_process(["config", str(bad)], capfd, f"{bad}:2", "not a gin text file", "UTF-8")


def test_a_directory_given_as_config_says_so(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    folder = tmp_path / "experiments.gin"
    folder.mkdir()
    _one_line_in_process(["config", str(folder)], capfd, "is a directory")


def test_an_empty_config_is_refused(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    empty = tmp_path / "empty.gin"
    empty.write_text("# nothing here\n")
    _one_line_in_process(["config", str(empty)], capfd, "binds nothing", "include 'base.gin'")


def test_a_string_for_the_data_is_one_store() -> None:
    from flowkit import config
    from flowkit.train.settings import Trainer

    config.parse((), ["Trainer.data = '/stores/a.zarr'"])
    assert Trainer().data == ("/stores/a.zarr",)


def test_a_start_that_fails_before_its_first_step_leaves_nothing(store: Path, tmp_path: Path, monkeypatch) -> None:
    from reliability_helpers import TINY

    from flowkit.errors import TrainingError
    from flowkit.loggers import jsonl
    from flowkit.train import run

    def refuse(self, *args, **kwargs):
        raise TrainingError("cannot open metrics.jsonl (test)")

    monkeypatch.setattr(jsonl.JsonlLogger, "open", refuse)
    out = tmp_path / "run"
    with pytest.raises(TrainingError, match="test"):
        run.train([DEBUG_GIN], list(TINY), data=[store], out=out, steps=2, device="cpu")
    assert not out.exists()
    kept = tmp_path / "kept"  # a directory that existed keeps what it held, and only that
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    with pytest.raises(TrainingError, match="test"):
        run.train([DEBUG_GIN], list(TINY), data=[store], out=kept, steps=2, device="cpu")
    assert sorted(p.name for p in kept.iterdir()) == ["notes.txt"]
