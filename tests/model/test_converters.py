"""The model `DiTConfig.build` makes holds standard torch.nn layers only; the converters of
flowkit.converters (CPU kernels, activation checkpointing) change it in place, and change its
numbers by no more than the tolerances stated here."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import collate, make_item
from torch import nn

from flowkit.converters.checkpointing import (
    apply_activation_checkpointing,
    is_checkpointed,
    remove_activation_checkpointing,
)
from flowkit.converters.cpu import convert_cpu_kernels, converted_kernels, revert_cpu_kernels
from flowkit.converters.cpu_kernels import CpuDropout, CpuGroupedConv1d, CpuLinear
from flowkit.model.dit import DiT, DiTConfig
from flowkit.train.memory import estimate_memory

LATENT_DIM, VOCAB, N_LANGUAGES = 8, 24, 3

#: The layer types of torch a built DiT may hold (attention is F.scaled_dot_product_attention).
STANDARD = {nn.Linear, nn.Dropout, nn.Conv1d, nn.LayerNorm, nn.Embedding, nn.ModuleList, nn.Sequential,
            nn.SiLU, nn.GELU, nn.Identity}

CONFIGS = [
    {"text_path": "unaligned"},
    {"text_path": "aligned", "dur_cond": "emotion"},
    {"arch": "f5_v1", "conditions": False, "long_skip": True},
]


def _build(seed: int = 0, dropout: float | None = None, **kw) -> nn.Module:
    torch.manual_seed(seed)
    model = DiTConfig(preset="tiny", dropout=dropout, **kw).build(LATENT_DIM, VOCAB, N_LANGUAGES)
    with torch.no_grad():  # adaLN-Zero starts at zero: give every weight some life
        for p in model.parameters():
            if torch.count_nonzero(p) == 0:
                p.normal_(0.0, 0.05)
    return model


def _batch(lengths=(200, 180, 160)):
    """Three items of 540 frames in all: the input stage's products pass oneDNN's row threshold."""
    items = [make_item(n, 4, seed=k) for k, n in enumerate(lengths)]
    x0, x1, cond = collate(items)
    return 0.5 * (x0 + x1), torch.tensor([0.2, 0.5, 0.8]), cond


def _kinds(model: nn.Module) -> set[type]:
    return {type(m) for m in model.modules()}


@pytest.mark.parametrize("kw", CONFIGS)
def test_the_built_model_holds_only_standard_torch_layers_until_converted(kw):
    model = _build(**kw)
    for module in model.modules():
        cls = type(module)
        if cls.__module__.startswith("flowkit."):
            # flowkit's own modules compose torch's; none is a subclass of a torch layer (F5-TTS's
            # arithmetic is a subclass of the DiT under interop/)
            assert cls.__module__.startswith(("flowkit.model.", "flowkit.interop.f5_network")), cls
            assert cls.__bases__ == (nn.Module,) or (module is model and cls.__bases__ == (DiT,)), cls
        else:
            assert cls in STANDARD, cls
    state = {k: v.clone() for k, v in model.state_dict().items()}
    convert_cpu_kernels(model)
    assert {CpuLinear, CpuGroupedConv1d, CpuDropout} <= _kinds(model)
    assert not {nn.Linear, nn.Dropout} & _kinds(model)
    assert all(m.groups == 1 or m.groups == m.in_channels for m in model.modules() if type(m) is nn.Conv1d)
    assert model.state_dict().keys() == state.keys()  # checkpoints load either way
    revert_cpu_kernels(model)
    assert not {CpuLinear, CpuGroupedConv1d, CpuDropout} & _kinds(model)
    assert converted_kernels(model) == {}
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


# The converted layers compute the plain layers' sums in another order (oneDNN's blocking
# against MKL's; torch's per-group im2col against oneDNN's convolution): float32 rounding of
# sums of up to 128 terms per layer, a few ulps each, compounded over the tiny model's layers
# and the backward pass. Measured on one thread: outputs within 3e-7 and gradients within 1e-6
# of each tensor's largest value; the tolerance leaves 20-30x for other thread counts and
# BLAS builds, and is far below any change of the math (a dropped bias or a transposed weight
# moves them by O(1)).
REL_OUT, REL_GRAD = 1e-5, 2e-5


@pytest.mark.parametrize("kernels", [{"linear": "onednn", "grouped_conv": "torch"},
                                     {"linear": "mkl", "grouped_conv": "channels_last"}])
@pytest.mark.parametrize("kw", CONFIGS[:2])
def test_the_cpu_converter_changes_outputs_and_gradients_by_float_rounding_only(kw, kernels):
    x_t, t, cond = _batch()
    results = []
    for convert in (False, True):
        model = _build(dropout=0.0, **kw).train()  # no dropout: the two draw different masks
        if convert:
            convert_cpu_kernels(model, kernels)
        out = model(x_t, t, cond).output
        out.pow(2).mean().backward()
        with torch.no_grad():
            sampled = model.eval()(x_t, t, cond).output  # the kernels without gradients
        results.append((out.detach(), sampled, {n: p.grad for n, p in model.named_parameters() if p.grad is not None}))
    (out, sampled, grads), (out_c, sampled_c, grads_c) = results
    for plain, converted in ((out, out_c), (sampled, sampled_c)):
        assert (plain - converted).abs().max() <= REL_OUT * plain.abs().max()
    assert grads.keys() == grads_c.keys()
    for name, g in grads.items():
        assert (g - grads_c[name]).abs().max() <= REL_GRAD * g.abs().max() + 1e-12, name


@pytest.mark.parametrize("cpu_kernels", [False, True])
@pytest.mark.parametrize("kw", CONFIGS[:2])
def test_activation_checkpointing_gives_the_same_loss_and_gradients(kw, cpu_kernels):
    """Exactly the same: the recomputed forward replays the same random state (dropout 0.1
    here) through the same kernels, so loss and gradients are bit-equal (tolerance 0)."""
    x_t, t, cond = _batch((120, 90))
    t = t[:2]
    results = []
    for checkpointing in (False, True):
        model = _build(dropout=0.1, **kw).train()
        if cpu_kernels:
            convert_cpu_kernels(model)
        if checkpointing:
            apply_activation_checkpointing(model)
            assert is_checkpointed(model)
        torch.manual_seed(7)
        loss = model(x_t, t, cond).output.pow(2).mean()
        loss.backward()
        results.append((loss.detach(), [(n, p.grad) for n, p in model.named_parameters() if p.grad is not None]))
    (loss, grads), (loss_c, grads_c) = results
    assert torch.equal(loss, loss_c)
    assert [n for n, _ in grads] == [n for n, _ in grads_c]
    for (name, g), (_, g_c) in zip(grads, grads_c, strict=True):
        assert torch.equal(g, g_c), name


def test_checkpointing_keeps_names_is_reversible_and_lowers_the_memory_estimate():
    model = _build().train()
    names = list(model.state_dict())
    lengths = [400] * 4
    plain = estimate_memory(model, lengths)
    apply_activation_checkpointing(model)
    apply_activation_checkpointing(model)  # twice: no change
    assert list(model.state_dict()) == names
    assert type(model.blocks[0]).__mro__[2].__name__ == "DiTBlock"
    checkpointed = estimate_memory(model, lengths)
    assert checkpointed.activations < 0.5 * plain.activations and checkpointed.transient > 0
    remove_activation_checkpointing(model)
    assert not is_checkpointed(model) and type(model.blocks[0]).__name__ == "DiTBlock"
    assert estimate_memory(model, lengths) == plain
    with pytest.raises(TypeError, match="needs a model with a `blocks` ModuleList"):
        apply_activation_checkpointing(nn.Linear(2, 2))
