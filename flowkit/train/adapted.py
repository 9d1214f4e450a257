"""Runs that train adapters (``Trainer.adapter``) on a frozen base: how each origin restores them.

An adapter run starts from a base by init-from (a run, a checkpoint, an imported F5-TTS
checkpoint): the base's EMA weights become the frozen weights, the adapter
(`flowkit.adapters.lora`) is inserted, and the run's EMA and optimizer are built over the
adapter's weights alone, so its checkpoints hold the adapter (and the grown embedding rows)
with a record of the base (`flowkit.adapters.files`). A resume loads that base again, checks
it is the same file, inserts the adapter and restores the adapter's weights, EMA, optimizer
and streams as any resume does: the run continues bit-identically.
"""

from __future__ import annotations

from typing import Any

from flowkit.checkpoints import files as checkpoint
from flowkit.errors import CheckpointError, ConfigError
from flowkit.train import distributed
from flowkit.train.ema import EMA
from flowkit.train.optimization import build_optimizer
from flowkit.train.origins import InitFrom, Origin, Restored, Resume
from flowkit.train.parts import RunParts
from flowkit.train.randomness import derive_seed
from flowkit.train.settings import Trainer

__all__ = ["adapter_record", "restore_origin"]


def adapter_record(model: Any) -> dict[str, Any] | None:
    """The record an adapted model carries for its checkpoints' meta (None: not adapted)."""
    record = getattr(model, "adapter_record", None)
    return dict(record) if isinstance(record, dict) else None


def _attach(parts: RunParts, settings: Trainer, base: dict[str, Any], new_rows: Any) -> None:
    """Insert ``settings.adapter`` into ``parts.model`` (the base's weights loaded) and rebuild
    the EMA and optimizer over the adapter's weights."""
    rows = (int(new_rows[0]), int(new_rows[1])) if new_rows else None
    model = settings.adapter.apply(parts.model, seed=derive_seed(settings.seed, "adapter"), new_rows=rows)
    model.adapter_record["base"] = dict(base)
    parts.model = model
    parts.ema = EMA(model, decay=settings.ema_decay, warmup=settings.ema_warmup)
    device = next(model.parameters()).device
    parts.optimizer = build_optimizer(model, lr=settings.lr, betas=settings.betas, weight_decay=settings.weight_decay,
                                      device=device)


def restore_origin(origin: Origin, parts: RunParts, settings: Trainer, ctx: distributed.DistContext) -> Restored:
    """``origin.restore``, with ``Trainer.adapter`` inserted where it is set.

    Raises:
        ConfigError: an adapter on a run with no base (a fresh start).
        CheckpointError: an init-from parent that holds adapter weights only (merge it
            first), or a resume whose base checkpoint is gone or changed.
    """
    from flowkit.adapters import files as adapter_files

    if isinstance(origin, InitFrom) and origin.loaded.meta.get("adapter"):
        raise CheckpointError(f"{origin.loaded.path} holds adapter weights only; merge it onto its base first "
                              f"(flowkit merge-adapter {origin.loaded.path} --out DIR) and start from DIR")
    if settings.adapter is None:
        return origin.restore(parts, settings, ctx)
    if isinstance(origin, Resume):
        record = origin.loaded.meta.get("adapter")
        if not isinstance(record, dict):
            raise CheckpointError(f"{origin.loaded.path} holds full weights, but the run's config sets Trainer.adapter")
        base = adapter_files.load_base(origin.loaded)
        weights = adapter_files.base_weights(base)
        rows = record.get("new_rows")
        from flowkit.train.vocab_growth import grow_language_embeddings, grow_text_embedding

        if rows:
            weights = grow_text_embedding(weights, int(rows[1]))
        weights = grow_language_embeddings(weights, len(parts.languages))  # as init-from grew them
        checkpoint.load_strict(parts.model, weights, what="base model", source=base.path)
        _attach(parts, settings, record["base"], rows)
        return origin.restore(parts, settings, ctx)
    if isinstance(origin, InitFrom):
        restored = origin.restore(parts, settings, ctx)
        parts.ema.copy_to(parts.model)  # the frozen base: the parent's EMA weights
        added = (restored.init_from or {}).get("added_tokens") or {}
        _attach(parts, settings, adapter_files.base_record(origin.loaded), added.get("rows"))
        return restored
    raise ConfigError("Trainer.adapter is set but the run starts from scratch: adapters train on a base; start it "
                      "with flowkit init-from BASE CONFIG (or flowkit train CONFIG --init-from BASE), "
                      "or drop Trainer.adapter")
