"""What rank 0 records about a run: the static part of every checkpoint's ``meta.json``,
the workspace files of a start or resume (config, latent stats, rejections,
``run_info.json``) and the ``report.md`` written when the run stops.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import torch

from flowkit import registry
from flowkit.checkpoints import files as checkpoint
from flowkit.checkpoints.synthesis_meta import SYNTHESIS_KEY, synthesis_meta
from flowkit.data.encoder_records import vocoder_record
from flowkit.loggers.jsonl import truncate_after_step
from flowkit.train import distributed
from flowkit.train.loop import TrainingLoop
from flowkit.train.origins import Origin, Restored, Resume
from flowkit.train.parts import RunParts
from flowkit.train.settings import Trainer
from flowkit.train.workspace import Workspace, git_commit

__all__ = ["checkpoint_meta", "run_report", "write_workspace"]


def checkpoint_meta(parsed: Any, settings: Trainer, parts: RunParts, restored: Restored,
                    ctx: distributed.DistContext) -> dict[str, Any]:
    """The static part of every checkpoint's ``meta.json``."""
    return {
        "config_text": parsed.text,
        "seed": settings.seed,
        "latent_stats": parts.stats.to_dict(),
        "vocab": parts.vocab.state_dict(),
        "languages": parts.languages,
        "model_config": settings.model.to_dict(),
        "data_fingerprint": parts.fingerprint,
        "stores": [str(p) for p in parts.train_set.paths],
        "latent_dim": parts.train_set.latent_dim,
        "frame_rate": parts.train_set.frame_rate,
        "sample_rate": parts.train_set.sample_rate,
        # what synthesis needs even when the stores have moved: the encoder record its
        # vocoder checks and reads, and the run's vocoder (None: the default)
        "encoder": parts.train_set.store_attrs.get("encoder"),
        "vocoder": vocoder_record(settings.vocoder),
        "init_from": restored.init_from,
        "world_size": ctx.world_size,
        SYNTHESIS_KEY: synthesis_meta(settings),
    }


def write_workspace(workspace: Workspace, parsed: Any, settings: Trainer, parts: RunParts, device: torch.device,
                    meta: dict[str, Any], origin: Origin, *, lock_takeover: dict[str, Any] | None, step: int) -> None:
    """Rank 0's files of a start or resume (``meta`` is the checkpoints' static meta)."""
    resumed = isinstance(origin, Resume)
    train_set, val_set = parts.train_set, parts.val_set
    workspace.create()
    # Records after the checkpoint's step (and a torn last line) are replayed by this run;
    # a fresh start drops every record of an attempt killed before its first checkpoint.
    removed = truncate_after_step(workspace.metrics, step if resumed else -1)
    workspace.write_config(parsed.text, [Path(p) for p, _ in parsed.sources])
    workspace.write_latent_stats(meta["latent_stats"])
    workspace.write_rejections(
        {"split": split, "store": str(r.store), "segment_id": r.segment_id, "reason": r.reason, "detail": r.detail}
        for split, ds in (("train", train_set), ("val", val_set)) for r in ds.report.rejections
    )
    workspace.write_run_info(
        {
            "config": parsed.text,
            "config_files": [str(p) for p in parsed.files],
            "bindings": list(parsed.bindings),
            "seed": settings.seed,
            "git_commit": git_commit(),
            "device": str(device),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "host": platform.node(),
            "data_fingerprint": meta["data_fingerprint"],
            "stores": meta["stores"],
            "load_reports": {"train": train_set.report.to_dict(), "val": val_set.report.to_dict()},
            "init_from": meta["init_from"],
            "resumed_from": str(origin.loaded.path) if resumed else None,
            "skipped_checkpoints": [list(s) for s in origin.skipped] if resumed else [],
            "allowed_config_changes": {k: list(v) for k, v in origin.allowed_changes.items()} if resumed else {},
            "lock_taken_over": lock_takeover,
            "metrics_lines_removed": removed,
            "num_parameters": sum(p.numel() for p in parts.model.parameters()),
            "cpu_kernels": meta.get("cpu_kernels"),  # the kernels chosen at start (None: torch's own layers)
            "world_size": meta["world_size"],  # processes training together (torchrun); rank 0 writes
            "plugins": _plugin_versions(),
        },
        resumed_at=step if resumed else None,
    )


def _plugin_versions() -> dict[str, str]:
    """``{distribution: version}`` of flowkit and every installed plugin distribution, so a
    run records which code its components came from."""
    from importlib import metadata

    dists = {"flowkit"} | {c.distribution for c in registry.components() if c.distribution}
    out = {}
    for dist in sorted(dists):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "unknown"
    return out


def run_report(workspace: Workspace, settings: Trainer, loop: TrainingLoop) -> str:
    """The markdown of the run's ``report.md``: its state, steps, best validation loss and checkpoints."""
    c = loop.counters
    saved = [p.name for _, p in checkpoint.list_checkpoints(workspace.checkpoints)]
    best_dirs = [p.name for _, p in checkpoint.list_checkpoints(workspace.best)]
    if c.step >= settings.steps:
        state = "completed"
    elif saved:
        state = f"stopped at step {c.step} (continue: flowkit resume {workspace.root})"
    else:
        state = (f"stopped at step {c.step} before its first checkpoint (Trainer.save_every = {settings.save_every}): "
                 "nothing to continue from; re-run the same `flowkit train` command to start it again")
    best = "-" if c.best_val_loss is None else f"{c.best_val_loss:.5f}"
    lines = [
        f"# Run {workspace.root.name}",
        "",
        f"- state: {state}",
        f"- steps: {c.step} / {settings.steps} ({c.updates} optimizer updates, {c.skipped} skipped)",
        f"- best EMA validation loss: {best} ({', '.join(best_dirs) or 'none kept'})",
        f"- checkpoints: {', '.join(saved) or 'none'}",
        f"- seed: {settings.seed}",
        f"- data fingerprint: {loop.meta['data_fingerprint']}",
        "- metrics: metrics.jsonl; config: config.gin",
        "",
    ]
    return "\n".join(lines)
