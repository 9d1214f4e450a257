"""A tiny DiT saved in the trainer's checkpoint format without training (synthesis tests).

`save_tiny_checkpoint` writes untrained weights whose duration head predicts a few frames
per character (its bias set to 1.5), so a synthesis from it has a length to work with.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

SR = 16000
#: the log_mel record of 80 bins at 100 Hz, for a checkpoint that carries its encoder
LOG_MEL_80 = {"name": "log_mel", "params": {"sample_rate": SR, "n_fft": 1024, "win_length": 640, "hop_length": 160,
                                            "n_mels": 80, "fmin": 0.0, "fmax": None, "log_floor": 1e-5}}


def save_tiny_checkpoint(root: Path, texts: Sequence[str], *, languages: Sequence[str] = ("en",),
                         text_path: str = "aligned", encoder: dict | None = None, step: int = 3) -> Path:
    """``root/checkpoints/step-<step>``: a tiny model over a char vocabulary of ``texts``;
    ``encoder`` None leaves the record out of meta (the fallback path of old checkpoints)."""
    from flowkit.checkpoints.files import save_checkpoint
    from flowkit.model.dit import DiTConfig
    from flowkit.text.chars import build_vocab

    torch.manual_seed(0)
    vocab = build_vocab(list(texts))
    cfg = DiTConfig(preset="tiny", text_path=text_path)
    model = cfg.build(80, vocab.size, len(languages))
    with torch.no_grad():  # a duration head that predicts a few frames per character
        for name, p in model.named_parameters():
            if name.startswith("duration") and name.endswith("bias"):
                p.fill_(1.5)
    state = model.state_dict()
    meta = {"config_text": "", "latent_stats": {"mean": [0.0] * 80, "std": [1.0] * 80, "n_frames": 1},
            "vocab": vocab.state_dict(), "languages": list(languages), "model_config": cfg.to_dict(),
            "latent_dim": 80, "frame_rate": 100.0, "sample_rate": SR, "stores": []}
    if encoder is not None:
        meta["encoder"] = encoder
    return save_checkpoint(Path(root) / "checkpoints", step,
                           {"model": state, "ema": {"num_updates": 0, "shadow": state}}, meta)
