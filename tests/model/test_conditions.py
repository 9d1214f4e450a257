"""`Conditions.stack`: padding, prefix masks, prompt, labels and unit tensors of a batch, and
that training's collate and synthesis's inference conditions both build their batch with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from model_fixtures import LATENT_DIM, build

from flowkit.batching.collate import CFGDrop, collate
from flowkit.batching.pairing import ItemPlan
from flowkit.data.dataset import SegmentInfo
from flowkit.data.stats import LatentStats
from flowkit.model.conditions import Conditions, ItemError
from flowkit.synth.sample import Utterance, inference_conditions
from flowkit.text.chars import build_vocab

D = 3
LABELS = dict(language=[1, 0, 2], emotions=[(3, 0.25), (0, None), (0, 0.5)], rate=[1, 0, 5], loudness=[2, 4, 0])


def stack(**changes) -> Conditions:
    args = dict(frames=[6, 9, 4], targets=[(2, 6), (0, 9), (3, 4)], text=[[4, 5, 6], [7], [8, 9]], **LABELS)
    return Conditions.stack(**{**args, **changes})


def test_shapes_padding_and_prefix_masks():
    c = stack()
    assert c.frame_mask.shape == c.target_mask.shape == (3, 9) and c.text.shape == c.text_mask.shape == (3, 3)
    assert c.frame_mask.tolist() == [[k < n for k in range(9)] for n in (6, 9, 4)]
    assert c.target_mask.tolist() == [[t0 <= k < t1 for k in range(9)] for t0, t1 in ((2, 6), (0, 9), (3, 4))]
    assert c.text.tolist() == [[4, 5, 6], [7, 0, 0], [8, 9, 0]]
    assert c.text_mask.tolist() == [[True] * 3, [True, False, False], [True, True, False]]
    assert c.language.tolist() == [1, 0, 2] and c.rate.tolist() == [1, 0, 5] and c.loudness.tolist() == [2, 4, 0]
    # the emotion rule: intensity 0 where unknown; known with an emotion or a given intensity
    assert c.emotion.tolist() == [3, 0, 0] and c.intensity.tolist() == [0.25, 0.0, 0.5]
    assert c.emotion_known.tolist() == [True, False, True]
    assert not c.drop_text.any() and not c.drop_prompt.any()
    assert c.prompt is None and c.char_unit is None and c.unit_frames is None and c.unit_mask is None
    assert c.layout is None
    for name, dtype in (("frame_mask", torch.bool), ("text", torch.long), ("language", torch.long),
                        ("intensity", torch.float32), ("emotion_known", torch.bool), ("drop_prompt", torch.bool)):
        assert getattr(c, name).dtype == dtype, name
    drops = (np.array([True, False, False]), np.array([False, False, True]))
    c = stack(drops=drops)
    assert c.drop_text.tolist() == [True, False, False] and c.drop_prompt.tolist() == [False, False, True]


def test_prompt_frames_past_the_prompt_are_zero():
    prompts = [torch.randn(2, D), np.ones((0, D), np.float16), np.full((3, D), 2.0, np.float16)]
    c = stack(prompts=prompts)
    assert c.prompt.shape == (3, 9, D) and c.prompt.dtype == torch.float32
    assert torch.equal(c.prompt[0, :2], prompts[0]) and (c.prompt[2, :3] == 2.0).all()
    for i, n_p in enumerate((2, 0, 3)):
        assert torch.count_nonzero(c.prompt[i, n_p:]) == 0  # target span and padding
    with pytest.raises(ValueError, match="item 2's prompt reaches into its target span"):
        stack(prompts=[p[:0] for p in prompts[:2]] + [np.zeros((4, D))])


def test_units():
    units = [[(0, 2, 0, 3), (2, 3, 4, 6)], None, [(1, 2, 1, 4)]]
    c = stack(units=units)
    assert c.char_unit.tolist() == [[0, 0, 1], [-1, -1, -1], [-1, 0, -1]]
    assert c.unit_frames.tolist() == [[[0, 3], [4, 6]], [[0, 0], [0, 0]], [[1, 4], [0, 0]]]
    assert c.unit_mask.tolist() == [[True, True], [False, False], [True, False]]
    c = stack(units=[(), None, []])
    assert c.unit_frames.shape == (3, 1, 2) and not c.unit_mask.any() and (c.char_unit == -1).all()
    with pytest.raises(ItemError, match=r"item 2: unit 0 spans characters 1:3 and frames 1:4, outside its 2 char"):
        stack(units=[[], [], [(1, 3, 1, 4)]])
    with pytest.raises(ItemError, match=r"item 0: unit 1 .* outside its 3 characters / 6 frames") as err:
        stack(units=[[(0, 1, 0, 2), (1, 2, 3, 7)], [], []])
    assert err.value.item == 0


def test_errors():
    with pytest.raises(ValueError, match="no items"):
        Conditions.stack([], [], [], language=[], emotions=[], rate=[], loudness=[])
    with pytest.raises(ValueError, match="item 1's target span is outside its frames"):
        stack(targets=[(2, 6), (3, 10), (3, 4)])
    with pytest.raises(ValueError):
        stack(rate=[1, 2])


def test_collate_and_inference_conditions_go_through_stack(monkeypatch):
    made: list[Conditions] = []
    original = Conditions.stack

    def spy(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(Conditions, "stack", spy)
    text = "ab cd"
    seg = SegmentInfo(store=0, row=0, segment_id="s0", speaker="a", language="en", emotion="sad", intensity=0.5,
                      rate=2, loudness=3, split="train", text=text, n_frames=6,
                      units=((0, 2, 0, 3), (3, 5, 3, 6)), units_estimated=False)
    batch = collate([ItemPlan(0, (2, 6), 0)], [seg], {0: np.zeros((6, D), np.float32)}, vocab=build_vocab([text]),
                    stats=LatentStats(mean=np.zeros(D, np.float32), std=np.ones(D, np.float32), n_frames=1),
                    languages=["en"], text_path="aligned", cfg_drop=CFGDrop(), rng=None)
    assert len(made) == 1 and batch.conditions is made[0]
    assert batch.conditions.unit_frames.tolist() == [[[0, 3], [3, 6]]]

    made.clear()
    model = build(text_path="aligned")
    prompt = torch.randn(4, LATENT_DIM)
    cond = inference_conditions(model, [Utterance(text=[5, 2, 6], prompt=prompt, prompt_text=[7], target_frames=5)],
                                separator_ids={2})
    assert len(made) == 2  # the draft the durations are predicted from, then the batch
    for name in ("frame_mask", "target_mask", "prompt", "text", "char_unit", "unit_frames", "unit_mask"):
        assert torch.equal(getattr(cond, name).cpu(), getattr(made[1], name)), name
    assert cond.char_unit.tolist() == [[0, 1, -1, 2]] and cond.target_mask.sum() == 5
