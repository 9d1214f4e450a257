"""Vocabulary extension in init-from: the grown text embedding keeps the parent's function
for old-vocabulary text (model and EMA), new rows follow the stated rule."""

from __future__ import annotations

from pathlib import Path

import torch
from f5_files import write_f5_safetensors

from flowkit.checkpoints.files import load_checkpoint
from flowkit.interop.f5_run import import_f5
from flowkit.model.conditions import Conditions
from flowkit.model.dit import DiTConfig
from flowkit.text.vocabs import vocab_from_state_dict
from flowkit.train.compatibility import check_init_from_model
from flowkit.train.vocab_growth import TEXT_EMBEDDING, grow_text_embedding


def _conditions(ids: torch.Tensor, n: int) -> Conditions:
    b = ids.shape[0]
    zeros = torch.zeros(b, dtype=torch.long)
    return Conditions(
        frame_mask=torch.ones(b, n, dtype=torch.bool), target_mask=torch.zeros(b, n, dtype=torch.bool),
        prompt=torch.randn(b, n, 100, generator=torch.Generator().manual_seed(1)), text=ids, text_mask=ids > 0,
        language=zeros, emotion=zeros, intensity=torch.zeros(b), emotion_known=torch.zeros(b, dtype=torch.bool),
        rate=zeros, loudness=zeros, drop_text=torch.zeros(b, dtype=torch.bool),
        drop_prompt=torch.zeros(b, dtype=torch.bool),
    )


def test_grown_model_and_ema_give_the_parents_outputs_for_old_text(tmp_path: Path) -> None:
    ckpt = write_f5_safetensors(tmp_path / "F5TTS_v1.safetensors")
    import_f5(ckpt, tmp_path / "run")
    loaded = load_checkpoint(tmp_path / "run" / "checkpoints" / "step-00000000")
    cfg = DiTConfig.from_dict(loaded.meta["model_config"])
    vocab = vocab_from_state_dict(loaded.meta["vocab"])
    texts = ["Привет, мир", "hello"]
    added = vocab.missing(texts)
    assert "П" in added and "h" in added  # the 40-token vocabulary lacks them
    child_vocab = vocab.extended(added)
    assert child_vocab.tokens[: len(vocab.tokens)] == vocab.tokens  # old ids unchanged
    x = torch.randn(2, 30, 100, generator=torch.Generator().manual_seed(0))
    t = torch.tensor([0.3, 0.8])
    old_ids = torch.tensor([vocab.encode("!#1 2")[:5], vocab.encode("2 1#!")[:5]])
    for which in ("model", "ema"):
        state = dict(loaded.state["model"]) if which == "model" else dict(loaded.state["ema"]["shadow"])
        parent = cfg.build(100, vocab.size, 0).eval()
        parent.load_state_dict(state)
        grown = grow_text_embedding(state, child_vocab.size)
        old = state[TEXT_EMBEDDING]
        assert torch.equal(grown[TEXT_EMBEDDING][: old.shape[0]], old)
        assert torch.equal(grown[TEXT_EMBEDDING][old.shape[0]:], old[1:].mean(0).expand(len(added), -1))
        child = cfg.build(100, child_vocab.size, 0).eval()
        child.load_state_dict(grown)
        with torch.no_grad():
            a = parent(x, t, _conditions(old_ids, 30)).output
            b = child(x, t, _conditions(old_ids, 30)).output
        assert torch.equal(a, b), which


def test_conditions_added_to_an_f5_model_start_at_zero_effect(tmp_path: Path) -> None:
    """init-from may turn flowkit's global conditions on (False -> True); the new
    embeddings are zero in the F5 archs, so the child computes the parent's function."""
    ckpt = write_f5_safetensors(tmp_path / "F5TTS_v1.safetensors")
    import_f5(ckpt, tmp_path / "run")
    loaded = load_checkpoint(tmp_path / "run" / "checkpoints" / "step-00000000")
    parent_cfg = DiTConfig.from_dict(loaded.meta["model_config"])
    child_cfg = DiTConfig.from_dict({**loaded.meta["model_config"], "conditions": True})
    from flowkit.model.dit import model_diff

    assert check_init_from_model(model_diff(parent_cfg, child_cfg), parent_path="p") == {"conditions": (False, True)}
    parent = parent_cfg.build(100, 41, 0).eval()
    parent.load_state_dict(loaded.state["model"])
    child = child_cfg.build(100, 41, 3).eval()
    missing = child.load_state_dict(loaded.state["model"], strict=False).missing_keys
    assert missing and all(k.startswith("globals.") for k in missing)
    assert all(float(p.abs().max()) == 0.0 for p in child.globals.parameters())
    ids = torch.tensor([[3, 4, 5, 0, 0]])
    x, t = torch.randn(1, 20, 100), torch.tensor([0.5])
    cond = _conditions(ids, 20)
    labelled = cond.replace(language=torch.tensor([2]), rate=torch.tensor([3]), loudness=torch.tensor([1]),
                            emotion=torch.tensor([2]), intensity=torch.tensor([0.7]),
                            emotion_known=torch.tensor([True]))
    with torch.no_grad():
        assert torch.equal(parent(x, t, cond).output, child(x, t, labelled).output)
