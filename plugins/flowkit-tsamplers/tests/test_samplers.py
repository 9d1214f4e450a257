"""The example plugin's own tests: ranges, determinism, and the shape of each density."""

import pytest
import torch
from flowkit_tsamplers.samplers import CosMapSampler, ModeSampler


@pytest.mark.parametrize("sampler", [ModeSampler(), ModeSampler(scale=0.0), CosMapSampler()])
def test_range_and_determinism(sampler):
    a = sampler(10_000, torch.Generator().manual_seed(0))
    b = sampler(10_000, torch.Generator().manual_seed(0))
    assert a.dtype == torch.float32 and a.shape == (10_000,)
    assert torch.equal(a, b)
    assert 0.0 <= float(a.min()) and float(a.max()) <= 1.0


def test_mode_scale_zero_is_uniform():
    t = ModeSampler(scale=0.0)(50_000, torch.Generator().manual_seed(1))
    hist = torch.histc(t, bins=10, min=0.0, max=1.0) / t.numel()
    assert torch.allclose(hist, torch.full((10,), 0.1), atol=0.01)


def test_mode_positive_scale_favours_the_middle():
    t = ModeSampler(scale=1.29)(50_000, torch.Generator().manual_seed(2))
    middle = ((t > 0.25) & (t < 0.75)).float().mean()
    assert middle > 0.6  # uniform would give 0.5


def test_mode_scale_out_of_range_is_refused():
    with pytest.raises(ValueError, match="outside"):
        ModeSampler(scale=3.0)
