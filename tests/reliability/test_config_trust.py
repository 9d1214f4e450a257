"""A config is data: a gin ``import`` of a module no installed plugin declares is refused
before any statement runs, and an included file that is not a gin file is never read into
an error message (flowkit.config.trust, docs/reliability.md "What flowkit trusts")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from reliability_helpers import DEBUG_GIN, assert_one_clear_line, cli

from flowkit import config
from flowkit.errors import ConfigError

#: a module that, once imported, leaves a file behind: the proof that config code ran
PAYLOAD = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


@pytest.fixture
def payload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """``(module name, marker file)``: an importable module on sys.path that writes the marker."""
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "ran.txt"
    (site / "fk_trust_payload.py").write_text(PAYLOAD.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(site))
    sys.modules.pop("fk_trust_payload", None)
    return "fk_trust_payload", marker


def _gin(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "exp.gin"
    path.write_text(f"include '{DEBUG_GIN}'\n{body}\n")
    return path


def test_an_undeclared_import_is_refused_and_nothing_runs(tmp_path: Path, payload: tuple[str, Path]) -> None:
    module, marker = payload
    path = _gin(tmp_path, f"Trainer.steps = 3\nimport {module}\n")
    with pytest.raises(ConfigError,
                       match=rf"exp.gin:3: `import {module}` is refused: a config is data.*plugin") as info:
        config.parse([path])
    assert "\n" not in str(info.value)
    assert not marker.exists() and module not in sys.modules


@pytest.mark.parametrize("statement", ["from {module} import thing", "import {module} as m"])
def test_other_forms_of_an_undeclared_import_are_refused(statement: str, tmp_path: Path,
                                                         payload: tuple[str, Path]) -> None:
    module, marker = payload
    with pytest.raises(ConfigError, match="is refused"):
        config.parse([_gin(tmp_path, statement.format(module=module))])
    assert not marker.exists()


def test_an_import_before_a_syntax_error_is_refused_and_never_runs(tmp_path: Path, payload: tuple[str, Path]) -> None:
    """gin runs the statements before a syntax error; the import among them must not run."""
    module, marker = payload
    with pytest.raises(ConfigError, match=f"import {module}"):
        config.parse([_gin(tmp_path, f"import {module}\nTrainer.steps = (1,\n")])
    assert not marker.exists()


def test_an_import_in_a_binding_is_refused(payload: tuple[str, Path]) -> None:
    module, marker = payload
    with pytest.raises(ConfigError, match=rf"-b/--binding #1:1: `import {module}` is refused"):
        config.parse([DEBUG_GIN], [f"import {module}"])
    assert not marker.exists()


def test_a_module_an_installed_plugin_declares_may_be_imported(tmp_path: Path) -> None:
    """plugins/flowkit-tsamplers is installed (make setup) and declares flowkit_tsamplers.samplers."""
    for statement in ("import flowkit_tsamplers.samplers", "import flowkit_tsamplers",
                      "import flowkit.flow.t_samplers"):
        parsed = config.parse([_gin(tmp_path, statement)], ["Trainer.t_sampler = @t_sampler.cosmap()"])
        assert "t_sampler.cosmap" in parsed.text


def test_gin_dynamic_registration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dynamic registration.*plugin"):
        config.parse([_gin(tmp_path, "from __gin__ import dynamic_registration")])


def test_a_checkpoint_config_with_an_undeclared_import_is_refused(payload: tuple[str, Path]) -> None:
    from flowkit.synth.inference import _legacy_components

    module, marker = payload
    with pytest.raises(ConfigError, match="the checkpoint's config:1: `import"):
        _legacy_components(f"import {module}\nTrainer.steps = 3\n")
    assert not marker.exists()


SECRET = "s3cret-token-0123"


@pytest.mark.parametrize("form", ["include '{path}'", "include r'{path}'"])
def test_an_included_file_that_is_not_gin_is_never_echoed(form: str, tmp_path: Path) -> None:
    secret = tmp_path / "credentials.txt"
    secret.write_text(f"token = {SECRET}\npassword: hunter2\n")
    with pytest.raises(ConfigError) as info:
        config.parse([_gin(tmp_path, form.format(path=secret))])
    assert SECRET not in str(info.value) and "hunter2" not in str(info.value)
    assert "exp.gin:2" in str(info.value)



def test_a_gin_named_link_to_another_file_is_never_echoed(tmp_path: Path) -> None:
    """A config given on the command line whose real file is no gin file (a link named exp.gin
    to a credentials file): the error names the file and quotes none of it."""
    secret = tmp_path / "credentials.txt"
    secret.write_text(f"token:{SECRET}:x\npassword: hunter2\n")
    link = tmp_path / "exp.gin"
    link.symlink_to(secret)
    with pytest.raises(ConfigError) as info:
        config.parse([link])
    text = str(info.value)
    assert SECRET not in text and "hunter2" not in text and "token" not in text, text
    assert "not a gin file" in text and "credentials.txt:1" in text

def test_the_cli_refuses_an_undeclared_import_in_one_line(tmp_path: Path) -> None:
    """Through the real CLI, with the payload module on PYTHONPATH: one line, exit 2, no file written."""
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "ran.txt"
    (site / "fk_trust_payload.py").write_text(PAYLOAD.format(marker=str(marker)))
    path = _gin(tmp_path, "import fk_trust_payload")
    result = cli("config", str(path), PYTHONPATH=str(site))
    assert_one_clear_line(result, "exp.gin:2", "`import fk_trust_payload` is refused", "plugin")
    assert result.returncode == ConfigError.exit_code
    assert not marker.exists()
