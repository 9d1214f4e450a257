"""How many floating-point operations the DiT spends on a batch: the throughput model behind
``tflops`` and ``mfu`` in the train records.

Shape legend: b batch, n frames of an item, nt characters of an item, c model dim,
td text dim, d latent channels, f feed-forward multiple, L layers (depth), k kernels.

Counted, as ``torch.utils.flop_counter`` counts them, are matrix products and
convolutions (2 FLOPs per multiply-add); normalisations, activations, embeddings and the
loss are left out (a few per cent at most). A training step costs three forward passes
(the backward pass computes two products per forward product), activation
checkpointing adds one more forward of the blocks (not counted: MFU counts the model's
work, not the recomputation). Per item of ``n`` frames and ``nt`` characters:

- transformer blocks: ``L * (2 n (3c² + c² + 2 f c²) + 4 n² c)`` -- qkv, output
  projection, feed-forward, and ``QKᵀ`` plus ``AV`` over the item's own frames (packed
  rows attend inside each item, so the quadratic term is per item, never per row); the
  linear part also runs on the few frames of row padding;
- per-item conditioning: ``L * 2 * 6c² + 2 * 2c²`` (adaLN of the blocks and the final
  layer) and the time MLP ``2 (256 c + c²)``;
- input stage, on the padded frames ``n_pad`` of the batch (it runs before packing):
  input projection ``2 n_pad (2d + td) c``, convolutional position embedding
  ``2 * 2 n_pad k c (c / g)`` (g groups), and on the unaligned path the ConvNeXt text
  encoder over frames ``n_pad * layers * (2 * 7 td + 8 td²)``;
- aligned path: the text encoder over characters, the duration head
  (``2 nt (3 td h + 3 h² + h)``, h its width, plus its FiLM ``2 * 2 h²`` per item) and
  the placement product ``2 n nt td``;
- output projection ``2 n c d``.

`forward_flops` is checked against ``torch.utils.flop_counter.FlopCounterMode`` in the
tests (tests/model/test_flops.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["PEAK_BF16_TFLOPS", "forward_flops", "peak_tflops", "train_step_flops"]

#: Dense bf16 tensor-core peak (TFLOP/s, no sparsity) from the vendors' data sheets;
#: ``Trainer.peak_tflops`` overrides it for other devices.
PEAK_BF16_TFLOPS = {"A100": 312.0, "H100": 989.0, "H200": 989.0, "B200": 2250.0}


def _text_encoder(frames: int, td: int, layers: int) -> float:
    return frames * layers * (2 * 7 * td + 8 * td * td)


def forward_flops(
    model: Any,
    item_frames: Sequence[int],
    item_chars: Sequence[int] | None = None,
    *,
    padded_frames: int | None = None,
    padded_chars: int | None = None,
    packed_frames: int | None = None,
) -> float:
    """FLOPs of one forward pass of ``model`` (a `flowkit.model.dit.DiT`) over a batch.

    Args:
        item_frames: valid frames of each item ``[b]``.
        item_chars: characters of each item ``[b]`` (aligned path; ignored otherwise).
        padded_frames: frames of the padded batch ``b * n`` the input stage runs on
            (default: ``b * max(item_frames)``).
        padded_chars: characters of the padded text ``b * nt`` (aligned path; default
            ``b * max(item_chars)``).
        packed_frames: frames the blocks run on, row padding included
            (`flowkit.model.packing.PackLayout.num_frames`; default: the valid frames).
    """
    s = model.cfg.sizes()
    c, td, depth, f = s["dim"], s["text_dim"], s["depth"], s["ff_mult"]
    d = model.latent_dim
    b = len(item_frames)
    frames = sum(item_frames)
    n_pad = padded_frames if padded_frames is not None else b * max(item_frames, default=0)
    t_blocks = packed_frames if packed_frames is not None else frames
    blocks = depth * (2 * t_blocks * (4 * c * c + 2 * f * c * c) + 4 * c * sum(n * n for n in item_frames))
    per_item = b * (depth * 2 * 6 * c * c + 2 * 2 * c * c + 2 * (256 * c + c * c) + 2 * 2 * c)
    stage = 2 * n_pad * (2 * d + td) * c
    k = model.cfg.conv_pos_kernel
    if k:
        stage += 2 * 2 * n_pad * k * c * (c // math.gcd(16, c))
    if model.cfg.text_path == "unaligned":
        stage += _text_encoder(n_pad, td, s["conv_layers"])
    else:
        chars = list(item_chars or [0] * b)
        nt_pad = padded_chars if padded_chars is not None else b * max(chars, default=0)
        h = s["dur_hidden"]
        stage += _text_encoder(nt_pad, td, s["conv_layers"])
        stage += 2 * nt_pad * (3 * td * h + 3 * h * h + h)
        if model.cfg.dur_cond == "emotion":
            stage += b * (2 * 2 * h * h + 2 * 2 * h)
        # The placement product runs on the padded batch: [b n nt] @ [b nt td].
        n_max, nt_max = max(item_frames, default=0), max(chars, default=0)
        stage += 2 * b * n_max * nt_max * td
    return float(blocks + per_item + stage + 2 * t_blocks * c * d)


def train_step_flops(model: Any, item_frames: Sequence[int], item_chars: Sequence[int] | None = None,
                     **kw: Any) -> float:
    """FLOPs of one training micro-batch: forward plus backward, three forwards."""
    return 3.0 * forward_flops(model, item_frames, item_chars, **kw)


def peak_tflops(device_name: str, override: float | None = None) -> float | None:
    """The bf16 peak of a device named like ``"NVIDIA H100 80GB HBM3"`` (None when unknown)."""
    if override is not None:
        return float(override)
    for key, value in PEAK_BF16_TFLOPS.items():
        if key in device_name.upper():
            return value
    return None
