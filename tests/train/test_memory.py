"""The step-0 memory estimate against what autograd really keeps, and its one-line refusal."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
from model_fixtures import LATENT_DIM, N_LANGUAGES, VOCAB, collate, make_item  # noqa: E402

from flowkit.batching.samplers import FrameBudget  # noqa: E402
from flowkit.converters.checkpointing import apply_activation_checkpointing  # noqa: E402
from flowkit.model.dit import DiTConfig  # noqa: E402
from flowkit.model.packing import PackLayout  # noqa: E402
from flowkit.train.memory import MemoryError_, check_memory, estimate_memory, worst_batch  # noqa: E402


def _saved_bytes(model, x, t, cond) -> int:
    """Bytes of the distinct storages autograd saves for the backward of one forward."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(x, t, cond).output.pow(2).sum()
    return sum(storages.values())


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_estimate_is_within_a_quarter_of_the_saved_tensors(text_path, checkpointing):
    torch.manual_seed(0)
    model = DiTConfig(preset="small", text_path=text_path).build(LATENT_DIM, VOCAB, N_LANGUAGES).train()
    if checkpointing:  # what Trainer.activation_checkpointing applies; the estimate reads it off the model
        apply_activation_checkpointing(model)
    lengths = [180, 150, 120, 90]
    items = [make_item(n, 12, seed=k) for k, n in enumerate(lengths)]
    _, x1, cond = collate(items)
    cond = cond.replace(layout=PackLayout.plan(lengths))
    t = torch.full((len(items),), 0.5)
    measured = _saved_bytes(model, x1, t, cond)
    est = estimate_memory(model, lengths, [len(it.text) for it in items], padded_frames=cond.frame_mask.numel(),
                          padded_chars=cond.text.numel())
    assert 0.75 * measured <= est.activations <= 1.25 * measured, (est.activations, measured)


def test_refusal_is_one_line_with_the_figures_and_the_fixes():
    model = DiTConfig(preset="tiny").build(LATENT_DIM, VOCAB, N_LANGUAGES)
    est = estimate_memory(model, [400] * 8)
    assert "estimated peak" in check_memory(est, torch.device("cpu"), limit_gb=100.0)
    with pytest.raises(MemoryError_) as err:
        check_memory(est, torch.device("cpu"), limit_gb=1e-6)
    text = str(err.value)
    assert "\n" not in text
    for needle in ("cannot fit", "GB", "gin/cpu.gin", "batch_sampler.frame_budget.frame_budget",
                   "Trainer.activation_checkpointing"):
        assert needle in text


def test_worst_batch_takes_the_longest_items_the_budget_allows():
    lengths = [100, 900, 300, 800, 50, 700]
    sampler = FrameBudget(frame_budget=2000, max_items=3)
    assert worst_batch(lengths, sampler) == [1, 3]  # 900 + 800; 700 more would pass the budget
    assert worst_batch(lengths, FrameBudget(frame_budget=5000, max_items=2)) == [1, 3]
