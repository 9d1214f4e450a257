"""LoRA adapters on the DiT's attention and feed-forward projections (``adapter.lora``).

Shape legend: o output features, i input features, r rank, V base vocabulary rows, V' grown
rows, dt text dim.

Low-rank adaptation (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models")
freezes a linear layer's weight ``W [o i]`` and learns ``B [o r]`` and ``A [r i]``:

    y = W x + (alpha / r) * B (A x)

``A`` starts Kaiming-uniform, ``B`` at zero, so the adapted network equals the base until
trained. The layers are inserted by Hugging Face ``peft`` (``inject_adapter_in_model``),
which wraps any ``nn.Linear``, subclasses included (the CPU-kernel layers of
`flowkit.converters.cpu_kernels` keep running as the wrapped base layer). The targets are every
linear layer of the DiT blocks' attention (``blocks.N.attn.*``) and feed-forward
(``blocks.N.ff.*``); ``targets`` narrows them to one of the two.

A vocabulary grown by init-from (`flowkit.train.vocab_growth`) adds text-embedding rows that
the base never trained: those rows are a separate trainable table (`GrownEmbedding`), the
base rows stay frozen.

The adapted model's ``state_dict`` and ``load_state_dict`` cover its trainable weights only
(LoRA ``A``/``B`` and new embedding rows), so the trainer's EMA, optimizer and checkpoints
hold the adapter alone; the frozen base is loaded from the base checkpoint that every
adapter checkpoint names (`flowkit.adapters.files`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import attrs
import torch
from torch import nn

from flowkit.errors import CheckpointError, ConfigError
from flowkit.registry import register

__all__ = ["TARGETS", "AdaptedModel", "GrownEmbedding", "LoRA", "adapter_keys", "target_names"]

#: Which projections ``targets`` may name, as patterns over module names.
TARGETS = {"attn": r"^blocks\.\d+\.attn\.", "ff": r"^blocks\.\d+\.ff\."}
#: peft's name for the one adapter a flowkit model carries.
ADAPTER_NAME = "default"
#: The text embedding's module name (both archs of `flowkit.model.dit`).
TEXT_EMBED = "text.embed"


def target_names(model: nn.Module, targets: tuple[str, ...]) -> list[str]:
    """Names of ``model``'s linear layers (``nn.Linear`` and subclasses) that ``targets`` select."""
    patterns = [re.compile(TARGETS[t]) for t in targets]
    return [name for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and any(p.match(name) for p in patterns)]


class GrownEmbedding(nn.Module):
    """A text embedding whose first ``V`` rows are frozen and whose grown rows train.

    ``base`` ``[V dt]`` (frozen) and ``new_rows`` ``[V'-V dt]`` (trainable); the table is
    their concatenation, ``weight`` ``[V' dt]``. Ids ``[...]`` -> vectors ``[... dt]``.
    """

    def __init__(self, table: torch.Tensor, first_new: int) -> None:
        super().__init__()
        self.base = nn.Parameter(table[:first_new].detach().clone(), requires_grad=False)
        self.new_rows = nn.Parameter(table[first_new:].detach().clone())

    @property
    def weight(self) -> torch.Tensor:
        return torch.cat([self.base, self.new_rows], dim=0)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(ids, self.weight)


def adapter_keys(model: nn.Module) -> list[str]:
    """The state-dict keys of ``model``'s trainable weights, in module order."""
    return [name for name, p in model.named_parameters() if p.requires_grad]


class AdaptedModel(nn.Module):
    """Mixed into an adapted model's class (`LoRA.apply`): its state dict is the adapter's.

    ``adapter_record`` holds the adapter's settings and parameter counts.
    """

    adapter_record: dict[str, Any]

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        full = super().state_dict(*args, **kwargs)
        prefix = kwargs.get("prefix", args[1] if len(args) > 1 else "")
        keep = {prefix + k for k in adapter_keys(self)}
        for key in [k for k in full if k not in keep]:
            del full[key]
        return full

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """Load adapter weights; with ``strict``, exactly the adapter's keys.

        Raises:
            CheckpointError: a missing or unexpected key (with ``strict``).
        """
        expected = set(adapter_keys(self))
        missing, unexpected = sorted(expected - set(state_dict)), sorted(set(state_dict) - expected)
        if strict and (missing or unexpected):
            key = missing[0] if missing else unexpected[0]
            raise CheckpointError(f"adapter weights do not fit this adapter: key {key!r} is "
                                  f"{'missing' if missing else 'unexpected'}; use the adapter config of the checkpoint")
        return super().load_state_dict(state_dict, strict=False, assign=assign)


def _adapted_class(cls: type) -> type:
    return type(f"Adapted{cls.__name__}", (AdaptedModel, cls), {"__module__": cls.__module__})


@register("adapter", "lora")
@attrs.frozen
class LoRA:
    """LoRA on the DiT's attention and feed-forward projections (Hu et al. 2021), through peft.

    ``rank`` r of ``B A``; ``alpha``: the update is scaled by ``alpha / rank`` (peft's
    ``lora_alpha``); ``dropout`` on the adapter's input (0: none; peft's ``lora_dropout``);
    ``targets``: ``attn``, ``ff`` or both.

    Raises:
        ConfigError: a rank below 1, alpha <= 0, dropout outside [0, 1), or an unknown target.
    """

    rank: int = 16
    alpha: float = 16.0
    dropout: float = 0.0
    targets: tuple[str, ...] = attrs.field(default=("attn", "ff"), converter=tuple)

    def __attrs_post_init__(self) -> None:
        if self.rank < 1:
            raise ConfigError(f"adapter.lora.rank = {self.rank!r} must be >= 1 (e.g. 16)")
        if not self.alpha > 0:
            raise ConfigError(f"adapter.lora.alpha = {self.alpha!r} must be > 0 (e.g. the rank)")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"adapter.lora.dropout = {self.dropout!r} must be in [0, 1)")
        unknown = [t for t in self.targets if t not in TARGETS]
        if unknown or not self.targets:
            raise ConfigError(f"adapter.lora.targets = {self.targets!r}; "
                              f"use a tuple of {', '.join(map(repr, TARGETS))}")

    @property
    def scaling(self) -> float:
        """``alpha / rank``: the factor of ``B A``."""
        return self.alpha / self.rank

    def record(self) -> dict[str, Any]:
        return {"name": "adapter.lora", "rank": self.rank, "alpha": self.alpha, "dropout": self.dropout,
                "targets": list(self.targets), "scaling": self.scaling}

    def apply(self, model: nn.Module, *, seed: int, new_rows: tuple[int, int] | None = None) -> nn.Module:
        """Insert LoRA into ``model`` in place, freeze the rest and return it (see `Adapter`).

        ``A`` is drawn from a generator seeded with ``seed`` (the global generators are left
        as they were), ``B`` is zero.

        Raises:
            ConfigError: the model has no linear layer that ``targets`` select.
        """
        from peft import LoraConfig, inject_adapter_in_model

        names = target_names(model, self.targets)
        if not names:
            raise ConfigError(f"adapter.lora.targets = {self.targets!r} selects no linear layer of "
                              f"{type(model).__name__} (expected blocks.N.attn.* / blocks.N.ff.*)")
        base_count = sum(p.numel() for p in model.parameters())
        config = LoraConfig(r=self.rank, lora_alpha=self.alpha, lora_dropout=self.dropout, target_modules=names,
                            bias="none", init_lora_weights=True)
        with torch.random.fork_rng(devices=[]):  # peft's init draws from the global generator
            inject_adapter_in_model(config, model, adapter_name=ADAPTER_NAME)
        for p in model.parameters():
            p.requires_grad_(False)
        gen = torch.Generator().manual_seed(int(seed))
        for name, module in model.named_modules():
            if name.endswith(f"lora_A.{ADAPTER_NAME}") and isinstance(module, nn.Linear):
                with torch.no_grad():  # Kaiming-uniform as nn.Linear's default, from our generator
                    bound = 1.0 / math.sqrt(module.in_features)
                    module.weight.uniform_(-bound, bound, generator=gen)
                module.weight.requires_grad_(True)
            elif name.endswith(f"lora_B.{ADAPTER_NAME}") and isinstance(module, nn.Linear):
                with torch.no_grad():
                    module.weight.zero_()
                module.weight.requires_grad_(True)
        if new_rows is not None and new_rows[1] > new_rows[0]:
            parent, _, attr = TEXT_EMBED.rpartition(".")
            owner = model.get_submodule(parent)
            table = getattr(owner, attr).weight
            if table.shape[0] != new_rows[1]:
                raise CheckpointError(f"the text embedding has {table.shape[0]} rows, "
                                      f"the grown vocabulary {new_rows[1]}")
            setattr(owner, attr, GrownEmbedding(table, new_rows[0]))
        model.__class__ = _adapted_class(type(model))
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        model.adapter_record = {**self.record(), "modules": names, "new_rows": list(new_rows) if new_rows else None,
                                "trainable_parameters": trainable, "base_parameters": base_count}
        return model
