"""Parameter counts of the model presets, for ``docs/models.md`` and its test.

Counts need data-derived sizes; the reference ones are F5-TTS's: a 100-bin log-mel latent
and its ~2.5k-symbol character/pinyin vocabulary (2545 + the filler id), with two languages.
Networks are built on the ``meta`` device, so even the 336M-parameter preset costs no memory.
"""

from __future__ import annotations

import torch

from flowkit.model.dit import DiTConfig
from flowkit.model.presets import PRESETS, SIZE_FIELDS

__all__ = ["REFERENCE_SIZES", "count_parameters", "parameter_table"]

#: Data-derived sizes the table assumes (F5-TTS base: 100 mel bins, 2545-symbol vocab + filler).
REFERENCE_SIZES: dict[str, int] = {"latent_dim": 100, "vocab_size": 2546, "n_languages": 2}

#: Variants shown per preset: (column title, DiTConfig keyword arguments).
VARIANTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("unaligned", {"text_path": "unaligned"}),
    ("aligned", {"text_path": "aligned"}),
    ("aligned + dur_cond emotion", {"text_path": "aligned", "dur_cond": "emotion"}),
)


def count_parameters(cfg: DiTConfig, **sizes: int) -> int:
    """Number of parameters of ``cfg.build(...)`` with `REFERENCE_SIZES` updated by ``sizes``."""
    args = {**REFERENCE_SIZES, **sizes}
    with torch.device("meta"):
        model = cfg.build(args["latent_dim"], args["vocab_size"], args["n_languages"])
    return sum(p.numel() for p in model.parameters())


def parameter_table() -> str:
    """The markdown table of every preset's sizes and parameter counts."""
    head = ["preset", *SIZE_FIELDS, *(f"params ({title})" for title, _ in VARIANTS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in PRESETS:
        s = DiTConfig(preset=name).sizes()
        row = [f"`{name}`", *(str(s[k]) for k in SIZE_FIELDS)]
        row += [f"{count_parameters(DiTConfig(preset=name, **kw)):,}" for _, kw in VARIANTS]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
