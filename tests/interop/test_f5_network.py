"""F5-TTS's network is a declared subclass of flowkit's DiT, chosen by ``model.dit.arch``."""

from __future__ import annotations

import pytest

from flowkit import registry
from flowkit.entry_points import networks
from flowkit.errors import ConfigError, RegistryError
from flowkit.interop.f5_network import F5DiT
from flowkit.model.dit import DiT, DiTConfig


def test_each_arch_builds_its_declared_network() -> None:
    assert {"flowkit", "f5_v1", "f5_base"} <= set(networks())
    assert type(DiTConfig(preset="tiny").build(8, 20, 2)) is DiT
    for arch in ("f5_v1", "f5_base"):
        model = DiTConfig(preset="tiny", arch=arch, conditions=False).build(8, 20, 0)
        assert type(model) is F5DiT and registry.network(arch) is F5DiT
        # one parameter layout for both archs: F5's weights map onto flowkit's names
        own = DiTConfig(preset="tiny", conditions=False).build(8, 20, 0)
        assert model.state_dict().keys() == own.state_dict().keys()


def test_an_f5_arch_refuses_the_aligned_text_path_at_build() -> None:
    cfg = DiTConfig(preset="tiny", arch="f5_v1", text_path="aligned")
    with pytest.raises(ConfigError, match="only the unaligned text path"):
        cfg.build(8, 20, 0)


def test_an_undeclared_arch_is_named_with_the_declared_ones() -> None:
    with pytest.raises(ConfigError, match=r"model.dit.arch = 'f5_v2'.*'f5_v1'"):
        DiTConfig(arch="f5_v2")
    with pytest.raises(RegistryError, match="did you mean 'f5_v1'"):
        registry.network("f5_v2")
