"""flowkit's F5-TTS arch gives F5-TTS's velocity with the same (seeded random) weights.

Fixtures (``tests/fixtures/f5/dit_*.npz``) were written by ``tools/f5_fixtures.py dit`` with
F5-TTS's own ``DiT`` (SWivid/F5-TTS 2ae2c9bd): inputs, key shapes, seed and outputs; the
weights are regenerated here from the seed (``f5_weights.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from f5_weights import random_f5_state
from numerics import VELOCITY_MAX_ABS

from flowkit.interop.f5 import (
    F5_CONFIGS,
    F5Velocity,
    flowkit_state_from_f5,
    model_config_from_f5_state,
)
from flowkit.model.conditions import Conditions
from flowkit.model.dit import DiTConfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "f5"
TOL = VELOCITY_MAX_ABS  # float32 rounding on any CPU; the figures are in tests/numerics.py


def _build(name: str):
    data = np.load(FIXTURES / f"dit_{name}.npz")
    meta = json.loads(str(data["meta"]))
    f5_state = {k: torch.from_numpy(v) for k, v in random_f5_state(meta["shapes"], meta["seed"]).items()}
    assert (abs(sum(float(v.abs().sum()) for v in f5_state.values()) - meta["weights_abs_sum"])
            < 1e-3 * meta["weights_abs_sum"])
    cfg = model_config_from_f5_state(f5_state, F5_CONFIGS[meta["config"]], source=name)
    model = DiTConfig.from_dict(cfg).build(100, meta["text_num_embeds"] + 1, 0).eval()
    model.load_state_dict(flowkit_state_from_f5(f5_state, source=name), strict=True)
    del f5_state
    return data, model


def _check(name: str) -> dict[str, float]:
    data, model = _build(name)
    f5 = F5Velocity(model).eval()
    x, cond, text = (torch.from_numpy(data[f"in_{k}"]) for k in ("x", "cond", "text"))
    time, mask = torch.from_numpy(data["in_time"]), torch.from_numpy(data["in_mask"])
    diffs = {}
    with torch.no_grad():
        for masked in (0, 1):
            for drop_audio, drop_text in ((0, 0), (1, 0), (0, 1), (1, 1)):
                key = f"out_mask{masked}_a{drop_audio}_t{drop_text}"
                got = f5(x, cond, text, time, mask=mask if masked else None,
                         drop_audio_cond=bool(drop_audio), drop_text=bool(drop_text))
                expected = torch.from_numpy(data[key])
                # F5's output on padded frames is not a velocity of anything; compare the valid ones
                keep = mask if masked else torch.ones_like(mask)
                diffs[key] = float((got - expected).abs()[keep].max())
            # flowkit's own forward (the one training and synthesis use) on the unpadded item
            if not masked:
                diffs["flowkit_forward"] = _flowkit_forward_diff(model, data, x, cond, text, time)
    print(name, "max abs difference", f"{max(diffs.values()):.3g}", diffs)
    assert max(diffs.values()) <= TOL, diffs
    # each drop flag changes the velocity (so the comparison above can see a wrong drop)
    assert not np.allclose(data["out_mask0_a0_t0"], data["out_mask0_a1_t0"])
    assert not np.allclose(data["out_mask0_a0_t0"], data["out_mask0_a0_t1"])
    return diffs


def _flowkit_forward_diff(model, data, x, cond, text, time) -> float:
    """DiT.forward with Conditions equivalent to F5's call, item 0 (no text padding)."""
    worst = 0.0
    for drop_audio, drop_text in ((0, 0), (1, 0), (0, 1), (1, 1)):
        n = x.shape[1]
        ids = text[:1] + 1
        c = Conditions(
            frame_mask=torch.ones(1, n, dtype=torch.bool), target_mask=torch.zeros(1, n, dtype=torch.bool),
            prompt=cond[:1], text=ids, text_mask=ids > 0, language=torch.zeros(1, dtype=torch.long),
            emotion=torch.zeros(1, dtype=torch.long), intensity=torch.zeros(1),
            emotion_known=torch.zeros(1, dtype=torch.bool),
            rate=torch.zeros(1, dtype=torch.long), loudness=torch.zeros(1, dtype=torch.long),
            drop_text=torch.tensor([bool(drop_text)]), drop_prompt=torch.tensor([bool(drop_audio)]),
        )
        got = model(x[:1], time[:1], c).output
        expected = torch.from_numpy(data[f"out_mask0_a{drop_audio}_t{drop_text}"][:1])
        worst = max(worst, float((got - expected).abs().max()))
    return worst


@pytest.mark.parametrize("name", ["small_v1", "small_base"])
def test_small_f5_dit_velocity_equal(name: str) -> None:
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["base_v1", "base_base"])
def test_base_f5_dit_velocity_equal(name: str) -> None:
    """F5TTS_v1_Base / F5TTS_Base sizes (dim 1024, depth 22, 16 heads): 336M random weights."""
    _check(name)


@pytest.mark.parametrize("name", ["small_v1", "small_base"])
def test_flowkit_forward_on_a_padded_batch_equals_each_item_alone(name: str) -> None:
    """flowkit's own forward (packed attention per item) on a padded batch gives each item
    F5's velocity of that item alone: the path that training and synthesis take."""
    data, model = _build(name)
    f5 = F5Velocity(model).eval()
    x, cond, text = (torch.from_numpy(data[f"in_{k}"]) for k in ("x", "cond", "text"))
    time, mask = torch.from_numpy(data["in_time"]), torch.from_numpy(data["in_mask"])
    ids = (text + 1).clamp(min=0)
    b, n = mask.shape
    c = Conditions(
        frame_mask=mask, target_mask=torch.zeros_like(mask), prompt=cond, text=ids, text_mask=ids > 0,
        language=torch.zeros(b, dtype=torch.long), emotion=torch.zeros(b, dtype=torch.long), intensity=torch.zeros(b),
        emotion_known=torch.zeros(b, dtype=torch.bool), rate=torch.zeros(b, dtype=torch.long),
        loudness=torch.zeros(b, dtype=torch.long), drop_text=torch.zeros(b, dtype=torch.bool),
        drop_prompt=torch.zeros(b, dtype=torch.bool),
    )
    with torch.no_grad():
        batch = model(x, time, c).output
        for i in range(b):
            k = int(mask[i].sum())
            alone = f5(x[i:i + 1, :k], cond[i:i + 1, :k], text[i:i + 1], time[i:i + 1])
            diff = float((batch[i, :k] - alone[0]).abs().max())
            print(name, "item", i, "padded batch vs alone, max abs difference", f"{diff:.3g}")
            assert diff <= TOL, i
            assert k == n or float(batch[i, k:].abs().max()) == 0.0
