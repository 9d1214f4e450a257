"""Synthesis: CFG convention, infilling output, inference conditions for both text paths."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import LATENT_DIM, N_LANGUAGES, VOCAB, build, collate

from flowkit.errors import ConfigError
from flowkit.flow.schedules import CosineVPred, FlowMatching
from flowkit.flow.solvers import Euler, Midpoint
from flowkit.model.dit import DiTConfig
from flowkit.synth.sample import Utterance, inference_conditions, synthesize, target_spans


def test_cfg_zero_is_the_conditional_model_alone(items):
    model = build()
    _, _, cond = collate(items)
    calls = []
    model.register_forward_hook(lambda m, a, k: calls.append(1))
    out = synthesize(
        model,
        cond,
        schedule=FlowMatching(),
        solver=Euler(),
        steps=3,
        cfg_strength=0.0,
        generator=torch.Generator().manual_seed(1),
    )
    assert len(calls) == 3  # one conditional pass per step, no unconditional pass
    # By hand: Euler on the conditional velocity from the same noise.
    b, n = cond.frame_mask.shape
    x = torch.randn((b, n, LATENT_DIM), generator=torch.Generator().manual_seed(1))
    for k in range(3):
        t = torch.full((b,), k / 3)
        x = x + (1 / 3) * model(x, t, cond, phase="even").output
    expected = torch.where((cond.frame_mask & ~cond.target_mask)[..., None], cond.prompt, x)
    expected = expected.masked_fill(~cond.frame_mask[..., None], 0.0)
    torch.testing.assert_close(out, expected)


def test_cfg_combines_conditional_and_unconditional(items):
    model = build()
    _, _, cond = collate(items)
    s = 1.5
    out = synthesize(
        model,
        cond,
        schedule=FlowMatching(),
        solver=Euler(),
        steps=1,
        cfg_strength=s,
        generator=torch.Generator().manual_seed(2),
    )
    b, n = cond.frame_mask.shape
    x = torch.randn((b, n, LATENT_DIM), generator=torch.Generator().manual_seed(2))
    t = torch.zeros(b)
    v_c = model(x, t, cond, phase="even").output
    uncond = cond.replace(
        drop_text=torch.ones(b, dtype=torch.bool), drop_prompt=torch.ones(b, dtype=torch.bool)
    )
    v_u = model(x, t, uncond, phase="even").output
    x1 = x + v_c + s * (v_c - v_u)
    target = cond.target_mask[..., None]
    torch.testing.assert_close(out[target.expand_as(out)], x1[target.expand_as(x1)])


def test_output_keeps_prompt_and_spans_are_the_targets(items):
    model = build()
    _, _, cond = collate(items, pad_frames=2)
    out = synthesize(
        model,
        cond,
        schedule=CosineVPred(),
        solver=Midpoint(),
        steps=2,
        generator=torch.Generator().manual_seed(0),
    )
    keep = cond.frame_mask & ~cond.target_mask
    assert torch.equal(out[keep], cond.prompt[keep])
    assert torch.count_nonzero(out[~cond.frame_mask]) == 0
    spans = target_spans(out, cond)
    assert [s.shape[0] for s in spans] == cond.target_mask.sum(1).tolist()
    assert model.training is False


def test_inference_conditions_unaligned():
    model = build()
    prompt = torch.randn(12, LATENT_DIM)
    cond = inference_conditions(
        model,
        [
            Utterance(
                text=[5, 6, 7, 2, 8],
                prompt=prompt,
                prompt_text=[9, 10, 2, 11],
                language=1,
                emotion=3,
                intensity=0.5,
            ),
            Utterance(text=[4, 4, 4], target_frames=9),
        ],
    )
    assert cond.frame_mask.sum(1).tolist() == [12 + 15, 9]
    assert cond.target_mask.sum(1).tolist() == [15, 9]
    assert (
        torch.equal(cond.prompt[0, :12], prompt) and torch.count_nonzero(cond.prompt[0, 12:]) == 0
    )
    assert cond.text[0, :9].tolist() == [9, 10, 2, 11, 5, 6, 7, 2, 8]
    assert cond.emotion_known.tolist() == [True, False]
    assert not cond.drop_text.any() and not cond.drop_prompt.any()
    out = synthesize(
        model,
        cond,
        schedule=FlowMatching(),
        solver=Euler(),
        steps=2,
        generator=torch.Generator().manual_seed(0),
    )
    assert out.shape == (2, 27, LATENT_DIM)
    with pytest.raises(ConfigError, match="give target_frames"):
        inference_conditions(model, [Utterance(text=[5, 6])])


def test_inference_conditions_aligned_sizes_units_from_durations():
    model = build(text_path="aligned")
    with torch.no_grad():  # every character lasts 3 frames: log(1 + 3)
        model.duration.out.weight.zero_()
        model.duration.out.bias.fill_(float(torch.log(torch.tensor(4.0))))
    prompt = torch.randn(10, LATENT_DIM)
    cond = inference_conditions(
        model,
        [
            Utterance(text=[5, 6, 2, 7], prompt=prompt, prompt_text=[8, 9, 9, 2]),
            Utterance(text=[5, 2, 6, 6]),
            Utterance(text=[5, 2, 6, 6], target_frames=15),
        ],
        separator_ids={2},
    )
    # item 0: prompt unit "8 9 9" keeps its 9 frames inside the 10 prompt frames (the one
    # left over is silence; its trailing separator is an edge, not a pause); the target's
    # units of 2 and 1 chars follow, with the 3-frame pause of their separator between them.
    assert cond.char_unit[0].tolist() == [0, 0, 0, -1, 1, 1, -1, 2]
    assert cond.unit_frames[0, :3].tolist() == [[0, 9], [10, 16], [19, 22]]
    assert cond.target_mask[0].sum() == 12 and cond.frame_mask[0].sum() == 22
    assert cond.unit_frames[1, :2].tolist() == [[0, 3], [6, 12]] and cond.frame_mask[1].sum() == 12
    # item 2: a given target length larger than words + pause (12 frames): centred in 15
    assert cond.unit_frames[2, :2].tolist() == [[1, 4], [7, 13]] and cond.frame_mask[2].sum() == 15
    out = synthesize(
        model,
        cond,
        schedule=FlowMatching(),
        solver=Euler(),
        steps=2,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.isfinite(out).all()


def test_negative_cfg_strength_is_refused(items):
    model = DiTConfig(preset="tiny").build(LATENT_DIM, VOCAB, N_LANGUAGES)
    _, _, cond = collate(items)
    with pytest.raises(ConfigError, match="cfg_strength"):
        synthesize(
            model,
            cond,
            schedule=FlowMatching(),
            solver=Euler(),
            cfg_strength=-1.0,
            generator=torch.Generator(),
        )
