"""Loss terms: values, counts, units, and exact zeros outside the mask."""

from __future__ import annotations

import attrs
import pytest
import torch
from model_fixtures import SPACE, collate, make_item

from flowkit import registry
from flowkit.errors import ConfigError
from flowkit.flow.schedules import CosineVPred, FlowMatching
from flowkit.losses import DurationL1, F0Consistency, LossInputs, MaskedMSE, MelL1
from flowkit.model.durations import char_duration_targets


def _inputs(
    schedule=FlowMatching(), *, poison: bool = True, with_duration: bool = True
) -> LossInputs:
    items = [make_item(30, 4, seed=5), make_item(18, 2, seed=6)]
    x0, x1, cond = collate(items, pad_frames=3, pad_chars=2)
    t = torch.tensor([0.3, 0.8])
    x_t, target = schedule.sample(x0, x1, t)
    g = torch.Generator().manual_seed(0)
    output = (target + 0.5 * torch.randn(target.shape, generator=g)).requires_grad_(True)
    log_duration = (
        torch.randn(cond.text.shape, generator=g).requires_grad_(True) if with_duration else None
    )
    if poison:
        # NaN and inf everywhere the losses must not look (padding and prompt frames).
        outside = ~(cond.target_mask & cond.frame_mask)
        with torch.no_grad():
            output[outside] = float("nan")
            output[outside.nonzero()[:1].unbind(1)] = float("inf")
    return LossInputs(output, target, x0, x1, x_t, t, cond, schedule, log_duration)


def test_masked_mse_is_mean_over_target_frames_and_channels():
    inp = _inputs(poison=False)
    term = MaskedMSE()(inp)
    mask = inp.cond.target_mask
    expected = ((inp.output - inp.target)[mask] ** 2).mean()
    torch.testing.assert_close(term.value, expected)
    assert term.count == float(mask.sum()) and term.unit == "frames"
    assert term.value.dtype == torch.float32 and term.value.dim() == 0


@pytest.mark.parametrize("loss", [MaskedMSE(), MelL1()], ids=repr)
@pytest.mark.parametrize("schedule", [FlowMatching(), CosineVPred()], ids=repr)
def test_masked_positions_add_nothing_to_value_or_gradient(loss, schedule):
    clean = _inputs(schedule, poison=False)
    dirty = _inputs(schedule, poison=True)
    a, b = loss(clean), loss(dirty)
    torch.testing.assert_close(a.value, b.value)
    b.value.backward()
    grad = dirty.output.grad
    outside = ~dirty.cond.target_mask
    assert torch.isfinite(grad).all()
    assert torch.count_nonzero(grad[outside]) == 0
    assert torch.count_nonzero(grad[~outside]) > 0


def test_mel_l1_is_zero_for_the_exact_target():
    inp = _inputs(CosineVPred(), poison=False)
    exact = LossInputs(
        inp.target, inp.target, inp.x0, inp.x1, inp.x_t, inp.t, inp.cond, inp.schedule
    )
    assert float(MelL1()(exact).value) < 1e-5


def test_duration_l1_counts_in_unit_and_pause_characters_only():
    inp = _inputs()
    target, mask = char_duration_targets(inp.cond)
    with torch.no_grad():
        inp.log_duration[~mask] = float("nan")
    term = DurationL1()(inp)
    expected = (inp.log_duration[mask] - target[mask]).abs().mean()
    torch.testing.assert_close(term.value, expected)
    assert term.unit == "chars" and term.count == float(mask.sum())
    term.value.backward()
    assert torch.count_nonzero(inp.log_duration.grad[~mask]) == 0


def test_duration_targets_are_log_mean_char_duration_of_the_unit():
    items = [make_item(30, 3, seed=9)]
    _, _, cond = collate(items, pad_chars=4, pad_units=2)
    target, mask = char_duration_targets(cond)
    it = items[0]
    for j, u in enumerate(it.char_unit):
        if u < 0:  # a separator between units k and k + 1: log(1 + pause / separators)
            k = max(it.char_unit[:j])
            assert mask[0, j]
            pause = it.units[k + 1][0] - it.units[k][1]
            seps = sum(1 for i in range(len(it.char_unit)) if it.char_unit[i] < 0 and max(it.char_unit[:i]) == k)
            assert target[0, j].item() == pytest.approx(torch.log1p(torch.tensor(pause / seps)).item(), rel=1e-6)
            continue
        s, e = it.units[u]
        m = it.char_unit.count(u)
        assert mask[0, j]
        assert target[0, j].item() == pytest.approx(
            torch.log1p(torch.tensor((e - s) / m)).item(), rel=1e-6
        )
    assert not mask[0, len(it.text) :].any()
    assert any(it.units[k + 1][0] > it.units[k][1] for k in range(2))  # the fixture has pauses


def test_separators_outside_two_units_get_no_duration_target():
    it = make_item(30, 3, seed=9)
    # a leading and a trailing separator: the clip's edges, not a pause between words
    it = attrs.evolve(it, text=[SPACE, *it.text, SPACE], char_unit=[-1, *it.char_unit, -1])
    _, _, cond = collate([it], pad_chars=2, pad_units=1)
    _, mask = char_duration_targets(cond)
    assert not mask[0, 0] and not mask[0, len(it.text) - 1]


def test_duration_l1_without_durations_names_the_fix():
    with pytest.raises(ConfigError, match="text_path = 'aligned'"):
        DurationL1()(_inputs(with_duration=False))


def test_f0_consistency_is_off_without_extractor_and_masked_with_one():
    inp = _inputs(poison=False)
    assert F0Consistency()(inp) is None
    term = F0Consistency(f0_extractor=lambda x: x.mean(-1))(inp)
    assert term.unit == "frames" and term.count == float(inp.cond.target_mask.sum())
    assert float(term.value.detach()) > 0


def test_empty_mask_gives_zero_not_nan():
    inp = _inputs(poison=False)
    cond = inp.cond.replace(target_mask=torch.zeros_like(inp.cond.target_mask))
    term = MaskedMSE()(
        LossInputs(inp.output, inp.target, inp.x0, inp.x1, inp.x_t, inp.t, cond, inp.schedule)
    )
    assert float(term.value.detach()) == 0.0 and term.count == 0.0


def test_losses_registered_with_weights():
    for name in ("masked_mse", "mel_l1", "duration_l1", "f0_consistency"):
        assert "weight" in [p[0] for p in registry.get("loss", name).parameters()]
