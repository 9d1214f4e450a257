"""AdamW with decoupled weight decay on matrices only, and the learning rate per update.

Weight decay follows nanoGPT's ``configure_optimizers``: every parameter with two or more
dimensions (linear and embedding weights) decays, vectors (biases, norm gains, adaLN
shifts) do not, since shrinking a gain or bias towards zero is not a useful prior.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["build_optimizer", "set_learning_rate"]


def build_optimizer(
    model: torch.nn.Module,
    *,
    lr: float,
    betas: Sequence[float],
    weight_decay: float,
    device: torch.device,
) -> torch.optim.AdamW:
    """AdamW over ``model``'s trainable parameters in two groups (decayed, not decayed).

    The fused kernel (one pass per parameter) is used on CUDA and on the CPU: on the CPU it
    is about 3x faster than torch's default per-tensor loop (2.3 against 7.1 ms a step for
    the 4.5M parameters of tools/bench_peer.py, one thread); same update rule.
    """
    decayed, plain = [], []
    for param in model.parameters():
        if param.requires_grad:
            (decayed if param.dim() >= 2 else plain).append(param)
    groups = [
        {"params": decayed, "weight_decay": weight_decay},
        {"params": plain, "weight_decay": 0.0},
    ]
    extra = {"fused": True} if device.type in ("cuda", "cpu") else {}
    return torch.optim.AdamW(groups, lr=lr, betas=(float(betas[0]), float(betas[1])), **extra)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group (the schedule is applied by the caller)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
