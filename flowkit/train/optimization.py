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

    The fused CUDA kernel is used on CUDA; the CPU keeps the default multi-tensor path.
    """
    decayed, plain = [], []
    for param in model.parameters():
        if param.requires_grad:
            (decayed if param.dim() >= 2 else plain).append(param)
    groups = [
        {"params": decayed, "weight_decay": weight_decay},
        {"params": plain, "weight_decay": 0.0},
    ]
    extra = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=lr, betas=(float(betas[0]), float(betas[1])), **extra)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group (the schedule is applied by the caller)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
