"""The documented FLOPs model of the DiT against torch's own FLOP counter."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import build, collate, make_item
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from flowkit.model.flops import forward_flops, peak_tflops, train_step_flops
from flowkit.model.packing import PackLayout


def _counted(model, x, t, cond, backward: bool) -> int:
    # The CPU's fused attention kernel has no formula in flop_counter; the math backend
    # runs the same attention as matrix products, which it counts.
    # The model as DiTConfig.build makes it: torch's own layers, whose products the counter sees.
    counter = FlopCounterMode(display=False)
    with counter, sdpa_kernel(SDPBackend.MATH):
        out = model(x, t, cond).output
        if backward:
            out.pow(2).sum().backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("text_path, dur_cond", [("unaligned", "none"), ("aligned", "none"), ("aligned", "emotion")])
@pytest.mark.parametrize("lengths", [[40, 40, 40], [40, 23, 31]])
def test_forward_flops_match_the_flop_counter(text_path, dur_cond, lengths):
    items = [make_item(n, 4, seed=k) for k, n in enumerate(lengths)]
    model = build(text_path=text_path, dur_cond=dur_cond)
    x0, _, cond = collate(items, pad_chars=1)
    t = torch.tensor([0.2, 0.5, 0.7])
    packed = None
    if len(set(lengths)) > 1:
        layout = PackLayout.plan(lengths, 50)  # two packed rows, one with row padding
        cond, packed = cond.replace(layout=layout), layout.num_frames
    counted = _counted(model, x0, t, cond, backward=False)
    b, n = cond.frame_mask.shape
    chars = [len(it.text) for it in items]
    expected = forward_flops(model, lengths, chars, padded_frames=b * n, padded_chars=cond.text.numel(),
                             packed_frames=packed)
    # Left out on purpose: nothing that flop_counter counts; the tolerance covers rounding only.
    assert expected == pytest.approx(counted, rel=1e-3)


def test_a_training_step_is_three_forwards():
    # Without convolutions: flop_counter's backward formula ignores the groups of a grouped
    # convolution (it counts the depthwise and grouped ones of the DiT ~17x too high).
    items = [make_item(40, 4, seed=k) for k in range(2)]
    model = build(text_path="unaligned", conv_pos_kernel=0, conv_layers=0).train()
    x0, _, cond = collate(items)
    counted = _counted(model, x0, torch.tensor([0.3, 0.6]), cond, backward=True)
    expected = train_step_flops(model, [40, 40])
    # The backward of the first layer's input is not needed (no gradient flows into x_t),
    # so the counter's figure is a little below three forwards.
    assert 0.9 * expected < counted <= expected * 1.001


def test_peak_table_and_override():
    assert peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops("Some GPU") is None
    assert peak_tflops("Some GPU", 100.0) == 100.0
