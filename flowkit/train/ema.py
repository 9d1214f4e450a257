"""Exponential moving average (EMA) of the model weights, with a warm-up of the decay.

The EMA weights are what a run exports for inference and what its validation reports
first: flow-matching TTS recipes evaluate and ship them (F5-TTS keeps an EMA with decay
0.9999). Early in training a decay that high would average over the random
initialisation, so the effective decay at update ``u`` (0-based count of EMA updates) is

    decay_u = min(decay, (1 + u) / (10 + u))

the ``num_updates`` rule of TensorFlow's ``tf.train.ExponentialMovingAverage``. The
shadow copies are float32 whatever the model's dtype, and floating buffers are averaged
like parameters (integer buffers are copied).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from flowkit.errors import CheckpointError

__all__ = ["EMA"]


class EMA:
    """EMA of ``model``'s floating parameters and buffers.

    Args:
        model: the trained module; its current weights start the shadow.
        decay: the final decay (0 <= decay < 1).
        warmup: apply the ``(1 + u) / (10 + u)`` warm-up (see the module docstring).
    """

    def __init__(self, model: torch.nn.Module, *, decay: float, warmup: bool = True) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.warmup = warmup
        self.num_updates = 0
        state = model.state_dict()
        self.names = [name for name, value in state.items() if value.is_floating_point()]
        self.shadow: dict[str, torch.Tensor] = {
            name: state[name].detach().float().clone() for name in self.names
        }
        self._shadow_list = list(self.shadow.values())
        # state_dict() rebuilds a dict of every tensor on each call; the tensors it returns
        # share storage with the model, so they are looked up once per model.
        self._cache: tuple[int, list[torch.Tensor]] | None = None

    def _sources(self, model: torch.nn.Module) -> list[torch.Tensor]:
        if self._cache is None or self._cache[0] != id(model):
            state = model.state_dict()
            self._cache = (id(model), [state[name].detach() for name in self.names])
        return self._cache[1]

    def current_decay(self) -> float:
        """The decay the next `update` applies."""
        if not self.warmup:
            return self.decay
        u = self.num_updates
        return min(self.decay, (1 + u) / (10 + u))

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        """Move the shadow towards ``model``'s weights by ``1 - decay`` (one fused call)."""
        weight = 1.0 - self.current_decay()
        current = [t.float() for t in self._sources(model)]
        torch._foreach_lerp_(self._shadow_list, current, weight)
        self.num_updates += 1

    @torch.no_grad()
    def copy_to(self, model: torch.nn.Module) -> None:
        """Overwrite ``model``'s floating weights with the EMA weights."""
        state = model.state_dict()
        for name in self.names:
            state[name].copy_(self.shadow[name])

    @contextlib.contextmanager
    def swapped_in(self, model: torch.nn.Module) -> Iterator[torch.nn.Module]:
        """Run a block with the EMA weights in ``model``; the raw weights come back after."""
        state = model.state_dict()
        saved = {name: state[name].detach().clone() for name in self.names}
        self.copy_to(model)
        try:
            yield model
        finally:
            with torch.no_grad():
                for name in self.names:
                    state[name].copy_(saved[name])

    def state_dict(self) -> dict[str, object]:
        """``{"num_updates", "shadow": {name: float32 tensor}}`` (the shadow tensors themselves)."""
        return {"num_updates": self.num_updates, "shadow": dict(self.shadow)}

    def load_state_dict(self, state: dict[str, object], *, allow_missing: frozenset[str] = frozenset()) -> None:
        """Load a saved EMA; names in ``allow_missing`` keep their current values.

        Raises:
            CheckpointError: a shadow tensor is missing (and not allowed to be), unexpected,
                or of another shape.
        """
        shadow = state["shadow"]
        assert isinstance(shadow, dict)
        missing = sorted(set(self.shadow) - set(shadow) - set(allow_missing))
        unexpected = sorted(set(shadow) - set(self.shadow))
        if missing or unexpected:
            raise CheckpointError(
                f"EMA weights do not fit the model: missing {missing[:5]}, unexpected "
                f"{unexpected[:5]}; the checkpoint comes from another model config"
            )
        for name, value in shadow.items():
            if value.shape != self.shadow[name].shape:
                raise CheckpointError(
                    f"EMA weight {name} has shape {tuple(value.shape)} in the checkpoint but "
                    f"{tuple(self.shadow[name].shape)} in the model; use the same model config"
                )
            self.shadow[name].copy_(value)
        self.num_updates = int(state["num_updates"])  # type: ignore[arg-type]
