"""The registry: registration, gin naming, discovery of installed plugins, and its errors."""

from __future__ import annotations

import sys
import textwrap
from importlib import metadata

import attrs
import gin
import pytest

from flowkit import config, entry_points, registry
from flowkit.errors import RegistryError


@pytest.fixture
def fresh_load(monkeypatch):
    """Let `load_plugins` run again (built-in modules are already imported, so it is cheap)."""
    monkeypatch.setattr(registry, "_LOADED", False)  # restored afterwards by monkeypatch


def make_dist(root, dist, module, body, entries, kinds=()):
    """Write an installed distribution (dist-info + module) under ``root``; ``kinds`` are
    ``(kind, "module:Protocol")`` declarations."""
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "\n".join(f"{name} = {module}" for name in entries)
    kind_lines = "".join(f"{kind} = {target}\n" for kind, target in kinds)
    text = f"[flowkit.plugins]\n{lines}\n" + (f"[flowkit.kinds]\n{kind_lines}" if kinds else "")
    (info / "entry_points.txt").write_text(text)
    (info / "top_level.txt").write_text(module + "\n")
    (info / "RECORD").write_text(f"{module}.py,,\n")
    (root / f"{module}.py").write_text(textwrap.dedent(body))


@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._top_level_distributions.cache_clear()
    entry_points.declared_kinds.cache_clear()
    yield tmp_path
    registry._top_level_distributions.cache_clear()
    entry_points.declared_kinds.cache_clear()
    for name in [m for m in sys.modules if m.startswith("fkplug_")]:
        del sys.modules[name]


def test_register_get_and_gin_name():
    @registry.register("t_sampler", "test_fixed_half")
    @attrs.frozen
    class Half:
        """Always t = 0.5."""

        value: float = 0.5

    try:
        comp = registry.get("t_sampler", "test_fixed_half")
        assert comp.gin_name == "t_sampler.test_fixed_half"
        assert comp.summary == "Always t = 0.5."
        assert comp.parameters() == [("value", "float", "0.5")]
        gin.parse_config("t_sampler.test_fixed_half.value = 0.25")
        assert Half().value == 0.25  # the binding reaches the attrs field
    finally:
        registry._REGISTRY.pop(("t_sampler", "test_fixed_half"))
        gin.config._REGISTRY.pop("t_sampler.test_fixed_half")


def test_every_registered_component_is_addressable_from_gin():
    registry.load_plugins()
    comps = registry.components()
    kinds = {c.kind for c in comps}
    for kind in ("schedule", "t_sampler", "loss", "logger", "batch_sampler", "pairing", "encoder",
                 "vocoder", "solver", "lr_schedule", "text", "aligner", "model"):
        assert kind in kinds, f"no built-in {kind}"
    for comp in comps:
        assert gin.config._REGISTRY.get_match(comp.gin_name) is not None, comp.gin_name
        for name, _, default in comp.parameters():
            if default == "REQUIRED" or default.startswith("<"):
                continue
            gin.clear_config()
            gin.parse_config(f"{comp.gin_name}.{name} = {default}")  # every parameter binds


def test_unknown_name_suggests_the_closest():
    registry.load_plugins()
    with pytest.raises(RegistryError, match=r"no schedule named 'flow_matchin' \(did you mean 'flow_matching'\?\)"):
        registry.get("schedule", "flow_matchin")
    with pytest.raises(RegistryError, match=r"unknown component kind 'shedule' \(did you mean 'schedule'"):
        registry.get("shedule", "flow_matching")


def test_gin_misspelled_component_and_parameter():
    with pytest.raises(Exception, match=r"unknown component or configurable 'schedule.cosine_vpre'.*"
                                        r"did you mean 'schedule.cosine_vpred'"):
        config.parse((), ["Trainer.schedule = @schedule.cosine_vpre()"])
    with pytest.raises(Exception,
                       match=r"schedule.flow_matching has no parameter 'sigma_mn'.*did you mean 'sigma_min'"):
        config.parse((), ["schedule.flow_matching.sigma_mn = 0.1"])


def test_discovers_the_installed_example_plugin_without_importing_it():
    entries = {e.gin_name: e for e in entry_points.discover()}
    assert entries["t_sampler.mode"].distribution == "flowkit-tsamplers"
    assert entries["t_sampler.mode"].target == "flowkit_tsamplers.samplers"
    registry.load_plugins()
    comp = registry.get("t_sampler", "mode")
    assert comp.distribution == "flowkit-tsamplers"
    assert comp.module == "flowkit_tsamplers.samplers"


def test_example_plugin_usable_from_a_binding():
    import torch

    config.parse((), ["t_sampler.mode.scale = 0.5"])
    sampler = gin.config._REGISTRY.get_match("t_sampler.mode").wrapped()
    assert sampler.scale == 0.5
    t = sampler(8, torch.Generator().manual_seed(0))
    assert t.shape == (8,)


def test_collision_names_both_modules_and_distributions(site, fresh_load):
    make_dist(site, "fkplug-dup", "fkplug_dup", """
        import attrs, flowkit

        @flowkit.register("t_sampler", "uniform")
        @attrs.frozen
        class Mine:
            pass
        """, ["t_sampler.uniform"])
    with pytest.raises(RegistryError) as err:
        registry.load_plugins()
    msg = str(err.value)  # found in the metadata, before either module is imported
    assert "t_sampler.uniform is declared by two distributions" in msg
    assert "flowkit (flowkit.flow.t_samplers)" in msg
    assert "fkplug-dup (fkplug_dup)" in msg


def test_collision_of_undeclared_registrations_names_both_modules():
    with pytest.raises(RegistryError) as err:
        @registry.register("t_sampler", "uniform")
        @attrs.frozen
        class Mine:
            pass
    assert "t_sampler.uniform is registered twice: by flowkit.flow.t_samplers (distribution flowkit)" in str(err.value)


def test_plugin_failing_to_import_is_named(site, fresh_load):
    make_dist(site, "fkplug-broken", "fkplug_broken", "raise ImportError('needs libfoo')\n", ["loss.broken"])
    with pytest.raises(RegistryError, match=r"plugin loss.broken from distribution fkplug-broken failed to import "
                                            r"fkplug_broken: ImportError: needs libfoo"):
        registry.load_plugins()


def test_environment_variable_turns_autoload_off(site, fresh_load, monkeypatch):
    make_dist(site, "fkplug-broken2", "fkplug_broken2", "raise ImportError('boom')\n", ["loss.broken2"])
    monkeypatch.setenv(entry_points.AUTOLOAD_ENV, "1")
    registry.load_plugins()  # does not import the broken plugin
    assert "fkplug_broken2" not in sys.modules


def test_entry_point_with_a_bad_name(site, fresh_load):
    make_dist(site, "fkplug-badname", "fkplug_badname", "", ["justaname"])
    with pytest.raises(RegistryError, match="must be named '<kind>.<name>'"):
        entry_points.discover()


def test_discover_reads_metadata_only(site):
    make_dist(site, "fkplug-lazy", "fkplug_lazy", "raise RuntimeError('imported!')\n", ["loss.lazy"])
    names = [e.gin_name for e in entry_points.discover()]
    assert "loss.lazy" in names
    assert "fkplug_lazy" not in sys.modules
    assert any(ep.name == "loss.lazy" for ep in metadata.entry_points(group=entry_points.ENTRY_POINT_GROUP))


NEW_KIND = '''
from typing import Protocol, runtime_checkable

import attrs
import flowkit


@runtime_checkable
class Judge(Protocol):
    """Scores a clip (a kind this plugin adds)."""

    def score(self, audio) -> float: ...


@flowkit.register("judge_t", "constant")
@attrs.frozen
class Constant:
    """Every clip scores ``value``."""

    value: float = 1.0

    def score(self, audio) -> float:
        return self.value
'''


def test_a_plugin_declares_a_new_kind_listed_without_import(site, fresh_load, monkeypatch):
    """With plugins off (FLOWKIT_NO_PLUGINS=1) a third party's new kind is listed from its
    metadata alone; `flowkit plugins` otherwise imports it to show its summary and parameters."""
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    make_dist(site, "fkplug-judge", "fkplug_judge", NEW_KIND, ["judge_t.constant"],
              kinds=[("judge_t", "fkplug_judge:Judge")])
    assert entry_points.declared_kinds()["judge_t"].distribution == "fkplug-judge"
    monkeypatch.setenv("FLOWKIT_NO_PLUGINS", "1")
    result = CliRunner().invoke(app, ["plugins"])
    assert result.exit_code == 0, result.output
    assert "judge_t" in result.output and "constant" in result.output and "fkplug-judge" in result.output
    assert "fkplug_judge" not in sys.modules  # listed from metadata alone
    monkeypatch.delenv("FLOWKIT_NO_PLUGINS")
    registry.load_plugins()
    try:
        comp = registry.get("judge_t", "constant")
        assert comp.distribution == "fkplug-judge"
        assert entry_points.kinds()["judge_t"] == "Scores a clip (a kind this plugin adds)."
        assert registry.check_kind(comp.obj(), "judge_t", where="test").value == 1.0
    finally:
        registry._REGISTRY.pop(("judge_t", "constant"), None)
        gin.config._REGISTRY.pop("judge_t.constant")


def test_a_component_of_the_wrong_kind_is_one_clear_error():
    from flowkit.errors import ConfigError
    from flowkit.train.settings import Trainer

    config.parse((), ["Trainer.schedule = @loss.masked_mse()"])
    with pytest.raises(ConfigError,
                       match=r"Trainer.schedule = loss.masked_mse is not a schedule .*@schedule.flow_matching\(\)"):
        Trainer()


def test_flowkit_declares_its_own_components_like_a_plugin():
    """No client list in the registry: flowkit's components come from its own metadata."""
    entries = [e for e in entry_points.discover() if e.distribution == "flowkit"]
    assert {"schedule.flow_matching", "loss.masked_mse", "model.dit"} <= {e.gin_name for e in entries}
    assert not hasattr(registry, "BUILTIN_MODULES") and not hasattr(registry, "KINDS")


def test_every_declared_configurable_resolves():
    """Each ``flowkit.configurables`` entry point names an object that exists and is the gin
    configurable of its declared name (a stale ``module:attr`` after a move fails here)."""
    import gin

    from flowkit import registry

    declared = [name for name, _, _ in entry_points.entries(entry_points.CONFIGURABLE_GROUP)]
    assert {"Trainer", "Probe"} <= set(declared)
    for name in declared:
        obj = registry.configurable(name)
        assert obj is not None
        assert gin.config._REGISTRY.get_match(name) is not None, name
