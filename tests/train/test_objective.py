"""Micro-batch weighting: a step of two micro-batches equals one batch of their items,
for a frame-averaged flow loss and a character-averaged duration loss at once."""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import pytest
import torch

from flowkit import registry
from flowkit.batching.builder import BatchBuilder
from flowkit.batching.collate import CFGDrop
from flowkit.data.dataset import LatentDataset
from flowkit.data.stats import compute_latent_stats
from flowkit.model.conditions import Conditions
from flowkit.text.chars import build_vocab
from flowkit.train.objective import draw_flow, loss_names, loss_terms, unit_sums, unit_weighted


def _unit_totals(conds) -> dict[str, float]:
    return {unit: max(total, 1.0) for unit, total in unit_sums(conds).items()}


def _slice(cond: Conditions, sl: slice) -> Conditions:
    return attrs.evolve(cond, layout=None, **{  # the model plans the rows of the slice itself
        f.name: getattr(cond, f.name)[sl] for f in attrs.fields(Conditions)
        if isinstance(getattr(cond, f.name), torch.Tensor)
    })


@pytest.fixture
def setup(tiny_store: Path):
    registry.load_plugins()
    data = LatentDataset.open([tiny_store], "train", require_units=True)
    vocab = build_vocab(s.text for s in data.segments)
    config = registry.build("model", "dit", preset="tiny", text_path="aligned")
    torch.manual_seed(0)
    model = config.build(data.latent_dim, vocab.size, 1)
    builder = BatchBuilder(data, registry.build("pairing", "in_clip"), compute_latent_stats(data), vocab, ["en"],
                           "aligned", CFGDrop())
    batch, _ = builder.build([0, 5, 9, 14], np.random.default_rng(0), train=False)
    t, x0 = draw_flow(batch.x1.shape, registry.build("t_sampler", "uniform"), torch.Generator().manual_seed(0))
    losses = [registry.build("loss", "masked_mse"), registry.build("loss", "duration_l1", weight=0.5)]
    yield model, batch, t, x0, losses
    data.close()


def _grads(model: torch.nn.Module, micro: list[tuple], losses) -> tuple[torch.Tensor, dict, list[torch.Tensor]]:
    """The step objective as `TrainingLoop.train_step` forms it, over ``(x1, cond, t, x0)`` micro-batches."""
    model.zero_grad(set_to_none=True)
    totals = _unit_totals([cond for _, cond, _, _ in micro])
    schedule, names = registry.build("schedule", "flow_matching"), loss_names(losses)
    loss, terms = torch.zeros(()), {}
    for x1, cond, t, x0 in micro:
        named, _ = loss_terms(model, schedule, losses, names, x1, cond, t, x0, autocast=False)
        shares = unit_weighted(named, totals)
        objective = sum(term.weight * shares[term.name] for term in named)
        objective.backward()
        loss = loss + objective.detach()
        for name, share in shares.items():
            terms[name] = terms.get(name, 0.0) + share.detach()
    return loss, terms, [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_two_micro_batches_equal_one_batch(setup) -> None:
    model, batch, t, x0, losses = setup
    whole = [(batch.x1, batch.cond, t, x0)]
    halves = [(batch.x1[s], _slice(batch.cond, s), t[s], x0[s]) for s in (slice(0, 1), slice(1, 4))]
    loss_a, terms_a, grads_a = _grads(model, whole, losses)
    loss_b, terms_b, grads_b = _grads(model, halves, losses)
    assert set(terms_a) == {"masked_mse", "duration_l1"}
    torch.testing.assert_close(loss_a, loss_b, rtol=1e-5, atol=1e-6)
    for name in terms_a:
        torch.testing.assert_close(terms_a[name], terms_b[name], rtol=1e-5, atol=1e-6)
    assert len(grads_a) == len(grads_b)
    for ga, gb in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(ga, gb, rtol=1e-4, atol=1e-6)


def test_unit_totals_count_frames_and_in_unit_characters(setup) -> None:
    _, batch, *_ = setup
    totals = _unit_totals([batch.cond])
    assert totals["frames"] == batch.num_target_frames
    assert 0 < totals["chars"] <= batch.num_chars
