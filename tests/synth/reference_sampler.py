"""The plain sampler the batched one (`flowkit.synth.sample.synthesize`) is checked and
benchmarked against: every evaluation of the velocity field runs two full forward passes of
`DiT.forward`, the conditional one and then the unconditional one (text and prompt dropped),
as written in the F5-TTS paper; nothing is prepared or cached. Used by
tests/synth/test_sample_fast.py and tools/bench_sampling.py.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def reference_synthesize(model, cond, *, schedule, solver, steps: int, cfg_strength: float,
                         noise: torch.Tensor, on_step: Callable[[float], None] | None = None,
                         **_: object) -> torch.Tensor:
    """Latents ``[b n d]`` from ``noise [b n d]``: the prompt frames copied from ``cond.prompt``,
    zero on padding, as `synthesize` returns them (extra keyword arguments are ignored)."""
    b = cond.batch_size
    uncond = cond.replace(drop_text=torch.ones_like(cond.drop_text), drop_prompt=torch.ones_like(cond.drop_prompt))

    def field(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if on_step is not None:
            on_step(float(t))
        tb = t.reshape(()).expand(b).to(device=x.device, dtype=torch.float32)
        v = schedule.velocity(x, tb, model(x, tb, cond, phase="even").output.float())
        if cfg_strength == 0:
            return v
        v_uncond = schedule.velocity(x, tb, model(x, tb, uncond, phase="even").output.float())
        return v + cfg_strength * (v - v_uncond)

    was_training = model.training
    model.eval()
    try:
        x1 = solver(field, noise.to(torch.float32), steps)
    finally:
        model.train(was_training)
    keep_prompt = (cond.frame_mask & ~cond.target_mask)[..., None]
    x1 = torch.where(keep_prompt, cond.prompt.to(x1.dtype), x1)
    return x1.masked_fill(~cond.frame_mask[..., None], 0.0)
