"""The DiT: config validation, shapes, padding invariance, CFG dropout, durations, dur_cond."""

from __future__ import annotations

import re

import pytest
import torch
from model_fixtures import LATENT_DIM, N_LANGUAGES, VOCAB, build, collate, make_item, slice_item

from flowkit.errors import ConfigError
from flowkit.flow.schedules import FlowMatching
from flowkit.losses import DurationL1, LossInputs, MaskedMSE
from flowkit.model.dit import DUR_FILM_PREFIX, DiTConfig, ModelOutput, model_diff
from flowkit.model.durations import (
    char_units_from_ids,
    place_chars,
    unit_frames_from_durations,
)


def _forward(model, x0, x1, cond, t=None):
    t = torch.full((x1.shape[0],), 0.4) if t is None else t
    x_t, _ = FlowMatching().sample(x0, x1, t)
    return model(x_t, t, cond)


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
def test_output_shapes_and_padding_is_zero(items, text_path):
    model = build(text_path=text_path)
    x0, x1, cond = collate(items, pad_frames=2, pad_chars=1)
    out = _forward(model, x0, x1, cond)
    assert isinstance(out, ModelOutput)
    assert out.output.shape == x1.shape
    assert torch.count_nonzero(out.output[~cond.frame_mask]) == 0
    if text_path == "aligned":
        assert out.log_duration.shape == cond.text.shape
        assert torch.count_nonzero(out.log_duration[~cond.text_mask]) == 0
    else:
        assert out.log_duration is None


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
def test_item_does_not_depend_on_padding_or_neighbours(items, text_path):
    model = build(text_path=text_path)
    alone = collate(items[1:2])
    # The same item next to others, with extra padding of frames, characters and units
    # (filled with garbage), at a different batch position.
    crowded = collate(
        [items[0], items[2], items[1]], pad_frames=7, pad_chars=3, pad_units=2, garbage_seed=5
    )
    t1, t3 = torch.tensor([0.4]), torch.tensor([0.9, 0.1, 0.4])
    out_a = _forward(model, *alone, t=t1)
    out_c = _forward(model, *crowded, t=t3)
    n, nt = items[1].x1.shape[0], len(items[1].text)
    torch.testing.assert_close(out_c.output[2, :n], out_a.output[0], atol=1e-5, rtol=1e-5)
    if text_path == "aligned":
        torch.testing.assert_close(
            out_c.log_duration[2, :nt], out_a.log_duration[0], atol=1e-5, rtol=1e-5
        )

    def losses(out, x0, x1, cond, t, i):
        x_t, target = FlowMatching().sample(x0, x1, t)
        c = slice_item(cond, i)
        inp = LossInputs(
            out.output[i : i + 1],
            target[i : i + 1],
            x0[i : i + 1],
            x1[i : i + 1],
            x_t[i : i + 1],
            t[i : i + 1],
            c,
            FlowMatching(),
            None if out.log_duration is None else out.log_duration[i : i + 1],
        )
        terms = [MaskedMSE()(inp)] + ([DurationL1()(inp)] if text_path == "aligned" else [])
        return [(float(term.value.detach()), term.count) for term in terms]

    la, lc = losses(out_a, *alone, t1, 0), losses(out_c, *crowded, t3, 2)
    for (va, ca), (vc, cc) in zip(la, lc, strict=True):
        assert ca == cc and vc == pytest.approx(va, rel=1e-5)


def test_drop_prompt_equals_an_empty_prompt(items):
    model = build()
    x0, x1, cond = collate(items)
    dropped = cond.replace(drop_prompt=torch.tensor([True, False, False]))
    blank = cond.replace(
        prompt=torch.where(torch.tensor([True, False, False])[:, None, None], 0.0, cond.prompt)
    )
    a, b = _forward(model, x0, x1, dropped).output, _forward(model, x0, x1, blank).output
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a[0], _forward(model, x0, x1, cond).output[0])


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
def test_drop_text_hides_the_text(items, text_path):
    model = build(text_path=text_path)
    x0, x1, cond = collate(items)
    drop = torch.tensor([False, True, False])
    out = _forward(model, x0, x1, cond.replace(drop_text=drop)).output
    other_text = cond.text.clone()
    other_text[1] = torch.where(cond.text_mask[1], (cond.text[1] + 5) % VOCAB, cond.text[1])
    out2 = _forward(model, x0, x1, cond.replace(drop_text=drop, text=other_text)).output
    torch.testing.assert_close(out[1], out2[1])  # text of a dropped item is not seen
    assert not torch.allclose(out[1], _forward(model, x0, x1, cond).output[1])


def test_aligned_phases_differ_only_in_placement(items):
    model = build(text_path="aligned")
    x0, x1, cond = collate(items)
    t = torch.full((3,), 0.5)
    x_t, _ = FlowMatching().sample(x0, x1, t)
    pred, even = model(x_t, t, cond, phase="predicted"), model(x_t, t, cond, phase="even")
    torch.testing.assert_close(pred.log_duration, even.log_duration)
    assert not torch.allclose(pred.output, even.output)
    with pytest.raises(ValueError, match="phase"):
        model(x_t, t, cond, phase="random")


def test_flow_loss_does_not_train_the_duration_head(items):
    model = build(text_path="aligned").train()
    x0, x1, cond = collate(items)
    out = _forward(model, x0, x1, cond)
    out.output.square().mean().backward()
    head = [p.grad for n, p in model.named_parameters() if n.startswith("duration.")]
    assert all(g is None or torch.count_nonzero(g) == 0 for g in head)


def test_place_chars_even_and_proportional():
    _, _, cond = collate([make_item(20, 1, seed=0)])
    cond = cond.replace(
        text=torch.tensor([[5, 6, 7, 2]]),
        text_mask=torch.tensor([[True, True, True, True]]),
        char_unit=torch.tensor([[0, 0, 0, -1]]),
        unit_frames=torch.tensor([[[2, 14]]]),
        unit_mask=torch.tensor([[True]]),
        frame_mask=torch.ones(1, 20, dtype=torch.bool),
        target_mask=torch.ones(1, 20, dtype=torch.bool),
    )
    even = place_chars(cond, None)[0]
    assert even.sum(0).tolist() == [4.0, 4.0, 4.0, 0.0]  # 12 frames, 3 chars, the space gets none
    assert even[:2].sum() == 0 and even[14:].sum() == 0 and (even[2:14].sum(-1) == 1).all()
    prop = place_chars(cond, torch.tensor([[1.0, 2.0, 3.0, 9.0]]))[0]
    assert prop.sum(0).tolist() == [2.0, 4.0, 6.0, 0.0]
    assert prop[2:4, 0].all() and prop[4:8, 1].all() and prop[8:14, 2].all()


def test_unit_timings_from_durations():
    assert char_units_from_ids([5, 6, 2, 7, 2, 2, 8], {2}) == [0, 0, -1, 1, -1, -1, 2]
    log_d = torch.log1p(torch.tensor([2.0, 3.0, 9.0, 4.0, 0.0, 0.0, 1.0]))
    units_of = [0, 0, -1, 1, -1, -1, 2]
    # words of 5, 4 and 1 frames; the separator after word 0 predicts a 9-frame pause, the
    # two after word 1 none
    units = unit_frames_from_durations(log_d, units_of, start=10)
    assert units == [(10, 15), (24, 28), (28, 29)]
    stretched = unit_frames_from_durations(log_d, units_of, start=0, total=20, silence="none")
    assert stretched[0][0] == 0 and stretched[-1][1] == 20 and [e - s for s, e in stretched] == [10, 8, 2]
    # the default: predicted words and pauses (19 frames) centred in 30, silence at both edges
    centred = unit_frames_from_durations(log_d, units_of, start=100, total=30)
    assert centred == [(105, 110), (119, 123), (123, 124)]
    # words and pauses that do not fit are scaled down to fill the span exactly
    squeezed = unit_frames_from_durations(log_d, units_of, start=0, total=8)
    assert squeezed[0][0] == 0 and squeezed[-1][1] == 8 and all(e > s for s, e in squeezed[:2])
    with pytest.raises(ValueError, match="silence"):
        unit_frames_from_durations(log_d, units_of, total=20, silence="stretch")


def test_dur_cond_emotion_child_loads_parent_and_matches_its_durations(items):
    parent = build(text_path="aligned", dur_cond="none")
    torch.manual_seed(99)
    child = (
        DiTConfig(preset="tiny", text_path="aligned", dur_cond="emotion")
        .build(LATENT_DIM, VOCAB, N_LANGUAGES)
        .eval()
    )
    result = child.load_state_dict(parent.state_dict(), strict=False)
    film = sorted(k for k in child.state_dict() if k.startswith(DUR_FILM_PREFIX))
    assert film and sorted(result.missing_keys) == film and result.unexpected_keys == []
    _, _, cond = collate(items)
    torch.testing.assert_close(
        child.predict_durations(cond), parent.predict_durations(cond), rtol=0, atol=0
    )
    # The FiLM is live: once it moves, emotion changes the durations.
    with torch.no_grad():
        child.duration.film.proj.weight.normal_(0, 0.5)
    assert not torch.allclose(child.predict_durations(cond), parent.predict_durations(cond))


def test_dur_cond_none_ignores_emotion(items):
    model = build(text_path="aligned")
    _, _, cond = collate(items)
    other = cond.replace(
        emotion=(cond.emotion + 1) % 8,
        intensity=1 - cond.intensity,
        emotion_known=~cond.emotion_known,
    )
    torch.testing.assert_close(model.predict_durations(cond), model.predict_durations(other))


def test_aligned_path_without_timings_says_so(items):
    model = build(text_path="aligned")
    x0, x1, cond = collate(items)
    with pytest.raises(ValueError, match="require_units=True"):
        _forward(model, x0, x1, cond.replace(char_unit=None, unit_frames=None, unit_mask=None))


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (
            dict(preset="huge"),
            r"model.dit.preset = 'huge' is not a preset; use one of: tiny, small",
        ),
        (
            dict(text_path="phones"),
            r"model.dit.text_path = 'phones'; use one of: 'unaligned', 'aligned'",
        ),
        (
            dict(dur_cond="speaker"),
            r"model.dit.dur_cond = 'speaker'; use one of: 'none', 'emotion'",
        ),
        (dict(dur_cond="emotion"), r"model.dit.dur_cond = 'emotion' conditions the duration head"),
        (dict(dim=100, heads=3), r"model.dit.dim = 100 must be divisible by heads = 3"),
        (dict(depth=0), r"model.dit.depth = 0 must be a positive integer"),
        (dict(dropout=1.0), r"model.dit.dropout = 1.0 must be in \[0, 1\)"),
        (dict(conv_pos_kernel=4), r"model.dit.conv_pos_kernel = 4 must be odd"),
    ],
)
def test_config_errors_name_field_and_legal_values(kw, match):
    with pytest.raises(ConfigError) as info:
        DiTConfig(**kw)
    assert re.match(match, str(info.value).splitlines()[0])


def test_config_round_trip_and_diff():
    cfg = DiTConfig(preset="tiny", text_path="aligned", depth=3)
    again = DiTConfig.from_dict(cfg.to_dict())
    assert model_diff(cfg, again) == {}
    assert again.sizes() == cfg.sizes()
    # Resolved values are compared: an explicit preset value equals an absent one, and a
    # preset name differing only in name does not count.
    assert model_diff(DiTConfig(preset="tiny"), DiTConfig(preset="tiny", dim=64)) == {}
    assert (
        model_diff(
            DiTConfig(preset="tiny", **DiTConfig(preset="small").sizes()), DiTConfig(preset="small")
        )
        == {}
    )
    parent = DiTConfig(preset="tiny", text_path="aligned")
    child = DiTConfig(preset="tiny", text_path="aligned", dur_cond="emotion")
    assert model_diff(parent, child.to_dict()) == {"dur_cond": ("none", "emotion")}
    with pytest.raises(ConfigError, match="unknown fields"):
        DiTConfig.from_dict({"preset": "tiny", "width": 3})


def test_spec_rebuilds_the_same_network():
    model = build(text_path="aligned")
    spec = model.spec()
    again = DiTConfig.from_dict(spec["config"]).build(
        spec["latent_dim"], spec["vocab_size"], spec["n_languages"]
    )
    again.load_state_dict(model.state_dict())  # strict: same keys and shapes


def test_model_is_a_gin_configurable_component():
    import gin

    from flowkit import registry

    assert registry.get("model", "dit").module == "flowkit.model.dit"
    gin.parse_config(
        "model.dit.preset = 'tiny'\nmodel.dit.text_path = 'aligned'\nmodel.dit.depth = 3\n"
    )
    cfg = registry.get("model", "dit").obj()
    assert (cfg.preset, cfg.text_path, cfg.sizes()["depth"], cfg.sizes()["dim"]) == (
        "tiny",
        "aligned",
        3,
        64,
    )
