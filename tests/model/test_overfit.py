"""The tiny model memorises one fixed batch within 120 CPU steps (a smoke test of the
whole training path: conditions, both text paths, schedules, losses, backward)."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import LATENT_DIM, N_LANGUAGES, VOCAB, collate, make_item

from flowkit.flow.schedules import CosineVPred, FlowMatching
from flowkit.losses import DurationL1, LossInputs, MaskedMSE
from flowkit.model.dit import DiTConfig


@pytest.mark.parametrize(
    ("text_path", "schedule"),
    [("unaligned", FlowMatching()), ("aligned", CosineVPred())],
    ids=["unaligned-flow_matching", "aligned-cosine_vpred"],
)
def test_tiny_model_overfits_one_batch(text_path, schedule):
    torch.manual_seed(0)
    model = (
        DiTConfig(preset="tiny", text_path=text_path).build(LATENT_DIM, VOCAB, N_LANGUAGES).train()
    )
    items = [make_item(n, 3, seed=s) for s, n in enumerate([48, 40, 33, 25])]
    x0, x1, cond = collate(items)
    t = torch.tensor([0.2, 0.45, 0.7, 0.9])
    x_t, target = schedule.sample(x0, x1, t)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    history = []
    for _ in range(120):
        out = model(x_t, t, cond)
        inputs = LossInputs(out.output, target, x0, x1, x_t, t, cond, schedule, out.log_duration)
        flow = MaskedMSE()(inputs).value
        loss = flow + (DurationL1()(inputs).value if text_path == "aligned" else 0.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        history.append(float(flow.detach()))
    assert history[-1] * 10 <= history[0], history[::20]
