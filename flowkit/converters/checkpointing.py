"""Activation checkpointing per DiT block (``Trainer.activation_checkpointing``).

A checkpointed block keeps only its inputs for the backward pass and recomputes its
activations there (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"; F5-TTS's
``checkpoint_activations``): about a third more compute for a fraction of the activation
memory (`flowkit.train.memory.estimate_memory` counts it). The recomputation replays the
forward pass's random state (``torch.utils.checkpoint``, non-reentrant), so dropout draws the
same masks and loss and gradients equal the plain model's.

`apply_activation_checkpointing` changes each block's class, in place, to a subclass whose
``forward`` runs the block under ``torch.utils.checkpoint.checkpoint`` while training with
gradients enabled; parameter names and state dicts stay.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.utils.checkpoint
from torch import nn

__all__ = ["apply_activation_checkpointing", "is_checkpointed", "remove_activation_checkpointing"]


class _Checkpointed:
    """Mixin placed before a block's own class: its forward, checkpointed while training."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        plain = super().forward  # type: ignore[misc]
        if self.training and torch.is_grad_enabled():  # type: ignore[attr-defined]
            return torch.utils.checkpoint.checkpoint(plain, *args, use_reentrant=False, **kwargs)
        return plain(*args, **kwargs)


@functools.cache
def _checkpointed_class(cls: type) -> type:
    return type(f"Checkpointed{cls.__name__}", (_Checkpointed, cls), {"__module__": __name__})


def _blocks(model: nn.Module) -> nn.ModuleList:
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList):
        raise TypeError("activation checkpointing needs a model with a `blocks` ModuleList; "
                        f"{type(model).__name__} has none")
    return blocks


def apply_activation_checkpointing(model: nn.Module) -> nn.Module:
    """Checkpoint every block of ``model.blocks`` (a DiT's transformer blocks), in place.
    Applying it twice changes nothing. Returns ``model``.

    Raises:
        TypeError: ``model`` has no ``blocks`` ``nn.ModuleList``.
    """
    for block in _blocks(model):
        if not isinstance(block, _Checkpointed):
            block.__class__ = _checkpointed_class(type(block))
    return model


def remove_activation_checkpointing(model: nn.Module) -> nn.Module:
    """Undo `apply_activation_checkpointing` in place. Returns ``model``.

    Raises:
        TypeError: ``model`` has no ``blocks`` ``nn.ModuleList``.
    """
    for block in _blocks(model):
        if isinstance(block, _Checkpointed):
            block.__class__ = type(block).__mro__[2]
    return model


def is_checkpointed(model: nn.Module) -> bool:
    """Whether ``model``'s blocks are checkpointed (False for a model without ``blocks``)."""
    blocks = getattr(model, "blocks", None)
    return isinstance(blocks, nn.ModuleList) and len(blocks) > 0 and all(isinstance(b, _Checkpointed) for b in blocks)
