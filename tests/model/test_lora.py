"""adapter.lora on the DiT: equal to the base at init, only the adapter trains, its state
dict is the adapter's, and merged weights give the adapted forward."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import LATENT_DIM, N_LANGUAGES, VOCAB, collate

from flowkit.adapters.lora import LoRA, adapter_keys, target_names
from flowkit.errors import ConfigError
from flowkit.model.dit import DiTConfig


def _base(seed: int = 0) -> torch.nn.Module:
    """A tiny DiT with every weight moved off its init (the zero-initialised output layers
    would make every output 0)."""
    torch.manual_seed(seed)
    model = DiTConfig(preset="tiny").build(LATENT_DIM, VOCAB, N_LANGUAGES).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def _out(model: torch.nn.Module, items) -> torch.Tensor:
    x0, x1, cond = collate(items)
    t = torch.tensor([0.3, 0.6, 0.9])
    with torch.no_grad():
        return model(0.5 * x0 + 0.5 * x1, t, cond).output


def test_forward_equals_the_base_at_init(items) -> None:
    base = _base()
    before = _out(base, items)
    adapted = LoRA(rank=4).apply(base, seed=7)
    # B = 0: each adapted layer adds B (A x) = 0 exactly, so the outputs are bit-equal
    assert torch.equal(_out(adapted, items), before)
    assert target_names(_base(), ("attn", "ff")) == adapted.adapter_record["modules"] == [
        f"blocks.{i}.{m}" for i in range(2) for m in ("attn.qkv", "attn.out", "ff.0", "ff.3")]


def test_only_adapter_parameters_receive_gradients(items) -> None:
    model = LoRA(rank=4).apply(_base(), seed=7, new_rows=(20, VOCAB))
    model.train()
    with torch.no_grad():  # a non-zero B, so that A gets a gradient too
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    x0, x1, cond = collate(items)
    cond = cond.replace(text=cond.text.clamp(max=VOCAB - 1))
    out = model(0.5 * x0 + 0.5 * x1, torch.tensor([0.3, 0.6, 0.9]), cond).output
    out.pow(2).mean().backward()
    trainable = set(adapter_keys(model))
    assert trainable == set(model.state_dict())
    assert all(".lora_A." in k or ".lora_B." in k for k in trainable - {"text.embed.new_rows"})
    assert "text.embed.new_rows" in trainable
    for name, p in model.named_parameters():
        if name in trainable:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
        else:
            assert p.grad is None and not p.requires_grad, name
    record = model.adapter_record
    assert record["trainable_parameters"] == sum(model.state_dict()[k].numel() for k in trainable)
    assert record["trainable_parameters"] < 0.1 * record["base_parameters"]


def test_init_leaves_the_global_generator_and_is_seeded() -> None:
    base = _base()
    torch.manual_seed(3)
    expected = torch.rand(4)
    torch.manual_seed(3)
    a = LoRA(rank=4).apply(base, seed=11)
    assert torch.equal(torch.rand(4), expected)
    b = LoRA(rank=4).apply(_base(), seed=11)
    c = LoRA(rank=4).apply(_base(), seed=12)
    key = "blocks.0.attn.qkv.lora_A.default.weight"
    assert torch.equal(a.state_dict()[key], b.state_dict()[key])
    assert not torch.equal(a.state_dict()[key], c.state_dict()[key])


def test_merged_weights_give_the_adapted_forward(items) -> None:
    from flowkit.adapters.files import LORA_A, LORA_B

    lora = LoRA(rank=4, alpha=8.0)
    adapted = lora.apply(_base(), seed=7)
    with torch.no_grad():
        for p in adapted.parameters():
            if p.requires_grad:
                p.normal_(0, 0.2)
    expected = _out(adapted, items)
    merged = _base()
    state = merged.state_dict()
    own = adapted.state_dict()
    for name in adapted.adapter_record["modules"]:
        w = state[f"{name}.weight"].double()
        state[f"{name}.weight"] = (w + lora.scaling * own[f"{name}.{LORA_B}"].double()
                                   @ own[f"{name}.{LORA_A}"].double()).float()
    merged.load_state_dict(state)
    got = _out(merged, items)
    # W x + s B (A x) against (W + s B A) x: the same sums in another order, float32 rounding
    # of outputs of order 1 through 2 blocks: within 1e-5 absolute
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    assert (got - _out(_base(), items)).abs().max() > 1e-3  # the adapter changed the output


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"adapter.lora.rank = 0 must be >= 1"):
        LoRA(rank=0)
    with pytest.raises(ConfigError, match=r"adapter.lora.targets = \('conv',\)"):
        LoRA(targets=("conv",))
