"""Adapter checkpoints: their base, loading them onto it, and merging them into full weights.

A run trained with ``Trainer.adapter`` saves checkpoints in the format of
`flowkit.checkpoints.files` whose ``model`` and ``ema`` hold the adapter's weights only
(`flowkit.adapters.lora.AdaptedModel`) and whose ``meta.json`` has ``adapter``: its settings
(`LoRA.record`), the adapted module names, the grown embedding rows, the parameter counts,
and ``base``: the base checkpoint's path, step and the sha256 of its ``state.pt``.

The frozen base weights are the base checkpoint's EMA weights (its raw weights where the EMA
has none): what inference of the base uses, and what the adapter was trained on. Loading an
adapter onto a base checks the sha256, so an adapter is never applied to other weights than
its own base. Merging adds ``(alpha / r) B A`` to each adapted weight (float64 sum, stored as
float32) and puts the grown embedding rows after the base's rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from flowkit.checkpoints import files as ckpt
from flowkit.errors import CheckpointError

__all__ = ["base_record", "base_weights", "load_base", "merge_adapter", "merged_state"]

#: peft's key infix of LoRA's two matrices (`flowkit.adapters.lora`).
LORA_A, LORA_B = "lora_A.default.weight", "lora_B.default.weight"
NEW_ROWS = "text.embed.new_rows"
TEXT_EMBEDDING = "text.embed.weight"
#: Language embeddings ``[L+1 c]`` (id 0 = unknown) that init-from grows for a new language
#: with copies of the unknown row (`flowkit.train.vocab_growth`); frozen under an adapter.
LANGUAGE_EMBEDDINGS = ("globals.language.weight", "duration.language.weight")


def _state_sha256(path: Path) -> str:
    try:
        manifest = json.loads((path / ckpt.MANIFEST_FILE).read_text(encoding="utf-8"))
        return str(manifest["files"][ckpt.STATE_FILE]["sha256"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{path}: no readable {ckpt.MANIFEST_FILE} ({exc}); not a flowkit checkpoint") from None


def base_record(loaded: ckpt.LoadedCheckpoint) -> dict[str, Any]:
    """How an adapter names its base: absolute path, step, sha256 of ``state.pt``."""
    return {"checkpoint": str(loaded.path.resolve()), "step": loaded.step, "state_sha256": _state_sha256(loaded.path)}


def base_weights(loaded: ckpt.LoadedCheckpoint) -> dict[str, torch.Tensor]:
    """A full checkpoint's frozen-base weights: its raw weights overwritten by its EMA weights."""
    state = dict(loaded.state["model"])
    shadow = (loaded.state.get("ema") or {}).get("shadow") or {}
    state.update({k: v for k, v in shadow.items() if k in state})
    return state


def load_base(adapter: ckpt.LoadedCheckpoint, base: str | Path | None = None) -> ckpt.LoadedCheckpoint:
    """The base checkpoint of adapter checkpoint ``adapter``: ``base`` when given (a checkpoint
    or run directory), else the one its meta names; its ``state.pt`` must be the one the
    adapter was trained on.

    Raises:
        CheckpointError: ``adapter`` is not an adapter checkpoint, the base is missing, or it
            holds other weights than the adapter's base (one line naming both).
    """
    record = adapter.meta.get("adapter")
    if not isinstance(record, dict) or not isinstance(record.get("base"), dict):
        raise CheckpointError(f"{adapter.path} is not an adapter checkpoint (its meta.json has no adapter.base)")
    named = record["base"]
    path = Path(base) if base is not None else Path(named["checkpoint"])
    if not path.exists():
        raise CheckpointError(f"{adapter.path}: its base {path} does not exist; give the base checkpoint with --base "
                              f"(step {named.get('step')}, state.pt sha256 {str(named.get('state_sha256'))[:12]}...)")
    loaded = ckpt.load_checkpoint(ckpt.resolve_checkpoint(path))
    sha = _state_sha256(loaded.path)
    if sha != named.get("state_sha256"):
        raise CheckpointError(
            f"{adapter.path} is an adapter of {named['checkpoint']} (step {named.get('step')}, state.pt sha256 "
            f"{str(named.get('state_sha256'))[:12]}...); {loaded.path} holds other weights (sha256 {sha[:12]}...): "
            "give the adapter's own base with --base")
    if loaded.meta.get("adapter"):
        raise CheckpointError(f"{loaded.path} is itself an adapter checkpoint; a base holds full weights")
    return loaded


def merged_state(adapter: ckpt.LoadedCheckpoint, base: ckpt.LoadedCheckpoint, *, weights: str = "ema"
                 ) -> dict[str, torch.Tensor]:
    """Full model weights: ``base``'s (`base_weights`) with the adapter's ``weights`` ("ema" or
    "raw") merged in, keyed as the plain model's state dict.

    Raises:
        CheckpointError: an unknown ``weights``, or adapter weights missing for a module the
            record names.
    """
    if weights not in ("ema", "raw"):
        raise CheckpointError(f"weights = {weights!r}; use 'ema' or 'raw'")
    record = adapter.meta["adapter"]
    own = dict(adapter.state["model"])
    if weights == "ema":
        own.update(adapter.state["ema"]["shadow"])
    full = base_weights(base)
    rows = len(adapter.meta.get("languages") or ()) + 1
    for key in LANGUAGE_EMBEDDINGS:  # languages the adapter's data added: rows as init-from grew them
        if key in full and full[key].shape[0] < rows:
            table = full[key]
            full[key] = torch.cat([table, table[:1].expand(rows - table.shape[0], -1)], dim=0)
    if NEW_ROWS in own:
        first = int(record["new_rows"][0])
        full[TEXT_EMBEDDING] = torch.cat([full[TEXT_EMBEDDING][:first], own[NEW_ROWS].to(full[TEXT_EMBEDDING].dtype)])
    scaling = float(record["scaling"])
    for name in record["modules"]:
        try:
            a, b = own[f"{name}.{LORA_A}"], own[f"{name}.{LORA_B}"]
        except KeyError:
            raise CheckpointError(f"{adapter.path}: the adapter of {name} is missing from its weights") from None
        w = full[f"{name}.weight"]
        delta = b.to(torch.float64) @ a.to(torch.float64)
        full[f"{name}.weight"] = (w.to(torch.float64) + scaling * delta).to(w.dtype)
    return full


def merge_adapter(adapter_path: str | Path, out: str | Path, *, base: str | Path | None = None) -> Path:
    """Write adapter checkpoint ``adapter_path`` merged onto its base as a full checkpoint
    ``out/step-<step>`` (raw = base + raw adapter, EMA = base + EMA adapter), usable by
    synthesize, eval, init-from and average; meta.json keeps ``merged_adapter`` (the adapter's
    record and checkpoint).

    Raises:
        CheckpointError: as `load_base` raises, or an invalid checkpoint.
    """
    adapter = ckpt.load_checkpoint(ckpt.resolve_checkpoint(adapter_path))
    base_ckpt = load_base(adapter, base)
    raw = merged_state(adapter, base_ckpt, weights="raw")
    ema = merged_state(adapter, base_ckpt, weights="ema")
    shadow = {k: v for k, v in ema.items() if v.is_floating_point()}
    meta = {k: v for k, v in adapter.meta.items() if k not in ("format_version", "step", "adapter", "pairing_totals")}
    meta["merged_adapter"] = {**adapter.meta["adapter"], "adapter_checkpoint": str(adapter.path.resolve()),
                              "adapter_state_sha256": _state_sha256(adapter.path)}
    state = {"model": raw, "ema": {"num_updates": adapter.state["ema"].get("num_updates", 0), "shadow": shadow}}
    return ckpt.save_checkpoint(Path(out), adapter.step, state, meta)
