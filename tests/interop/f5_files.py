"""Random-weight F5-TTS checkpoints in F5's exact file formats, for the interop tests.

``.safetensors`` as F5-TTS releases them (EMA weights under ``ema_model.transformer.*``,
plus ema_pytorch's ``ema_model.initted`` / ``ema_model.step``) and ``.pt`` as its trainer
saves them (``model_state_dict``, ``ema_model_state_dict``, ``optimizer_state_dict``,
``scheduler_state_dict``, ``update``). Weights come from `f5_weights.random_f5_state`
with the key shapes that F5-TTS's own DiT has (stored in the parity fixtures).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from f5_weights import random_f5_state

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "f5"


def fixture_meta(name: str = "small_v1") -> dict:
    return json.loads(str(np.load(FIXTURES / f"dit_{name}.npz")["meta"]))


def f5_vocab_tokens(n: int) -> list[str]:
    """The first ``n`` lines of F5-TTS's released vocab.txt (from the tokenizer fixture)."""
    tokens = json.loads((FIXTURES / "tokenizer.json").read_text(encoding="utf-8"))["vocab"]
    return tokens[:n]


def f5_transformer_state(name: str = "small_v1", seed_offset: int = 0) -> dict[str, torch.Tensor]:
    meta = fixture_meta(name)
    state = random_f5_state(meta["shapes"], meta["seed"] + seed_offset)
    return {k: torch.from_numpy(v) for k, v in state.items()}


def write_vocab(path: Path, name: str = "small_v1") -> Path:
    tokens = f5_vocab_tokens(fixture_meta(name)["text_num_embeds"])
    path.write_text("".join(f"{t}\n" for t in tokens), encoding="utf-8")
    return path


def write_f5_safetensors(path: Path, name: str = "small_v1") -> Path:
    """A released-format file: EMA weights only."""
    from safetensors.torch import save_file

    tensors = {f"ema_model.transformer.{k}": v for k, v in f5_transformer_state(name).items()}
    tensors["ema_model.initted"] = torch.tensor(True)
    tensors["ema_model.step"] = torch.tensor(1200)
    save_file(tensors, str(path))
    write_vocab(path.parent / "vocab.txt", name)
    return path


def write_f5_pt(path: Path, name: str = "small_v1") -> Path:
    """A training-format file: raw weights (another seed) and EMA weights."""
    ema = {f"ema_model.transformer.{k}": v for k, v in f5_transformer_state(name).items()}
    ema.update({"initted": torch.tensor(True), "step": torch.tensor(1200)})
    raw = {f"transformer.{k}": v for k, v in f5_transformer_state(name, seed_offset=1).items()}
    torch.save({"model_state_dict": raw, "ema_model_state_dict": ema, "optimizer_state_dict": {},
                "scheduler_state_dict": {}, "update": 1200}, path)
    write_vocab(path.parent / "vocab.txt", name)
    return path
