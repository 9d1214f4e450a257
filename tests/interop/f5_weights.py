"""Random F5-TTS DiT weights from a seed, the same in any environment.

Used by ``tools/f5_fixtures.py`` (with F5-TTS's own code, to write the expected outputs)
and by the tests (without F5-TTS, from the key list the fixture stores), so the base-size
weights (336M parameters) are regenerated rather than committed. numpy's PCG64 stream
and its standard normal are the same across numpy versions on every platform; the
parity tests also check a checksum of the weights against the one the tool recorded.
"""

from __future__ import annotations

import zlib

import numpy as np

ROTARY = "rotary_embed.inv_freq"


def random_f5_state(shapes: dict[str, list[int]], seed: int) -> dict[str, np.ndarray]:
    """F5 DiT state (keys without ``transformer.``): normal weights scaled by
    ``0.5 / sqrt(fan_in)`` (vectors 0.05), F5's rotary table where ``rotary_embed.inv_freq``."""
    out = {}
    for key in sorted(shapes):
        shape = tuple(shapes[key])
        if key == ROTARY:  # not a weight: the table F5's rotary module computes, to the bit
            import torch

            head_dim = 2 * shape[0]
            out[key] = (1.0 / (10_000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))).numpy()
            continue
        rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 0
        scale = 0.5 / np.sqrt(fan_in) if fan_in else 0.05
        out[key] = (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float32)
    return out


def random_inputs(seed: int, batch: int, frames: int, text_len: int, vocab: int) -> dict[str, np.ndarray]:
    """F5 DiT inputs: noisy mel, masked mel (zeros on a span), token ids with -1 padding,
    times, and a frame mask whose second item is shorter."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, frames, 100), dtype=np.float32)
    cond = rng.standard_normal((batch, frames, 100), dtype=np.float32) * np.float32(2.0) - np.float32(4.0)
    cond[:, frames // 3: 2 * frames // 3] = 0.0
    text = rng.integers(0, vocab, size=(batch, text_len)).astype(np.int64)
    mask = np.ones((batch, frames), dtype=bool)
    for i in range(1, batch):
        mask[i, frames - 5 * i:] = False
        text[i, text_len - 3 * i:] = -1
    time = rng.uniform(0.05, 0.95, size=batch).astype(np.float32)
    return {"x": x, "cond": cond, "text": text, "time": time, "mask": mask}
