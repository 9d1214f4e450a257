"""Checkpoint averaging: the element-wise mean of several checkpoints of one run.

Averaging the weights of the last few checkpoints of a run (or of the few with the lowest
validation loss) smooths the noise of the final updates at no training cost: Vaswani et al.
(2017) average the last 5-20 checkpoints of the Transformer; ESPnet (``average_nbest_models``
over ``keep_nbest_models``) and CosyVoice (``average_model.py``) average the best by
validation loss.

The average is written as a flowkit checkpoint (`flowkit.checkpoints.files`) holding

    state.pt   {"model": mean of the raw weights, "ema": {"num_updates", "shadow": mean of
               the EMA weights}}: what synthesis, ``flowkit eval`` and ``init-from`` read
               (no optimizer or sampler state: an average is not a point of the run to
               resume from)
    meta.json  the newest averaged checkpoint's meta, with ``step`` its step, and
               ``averaged``: which checkpoints (path, step, EMA validation loss, sha256 of
               their state.pt), how they were chosen and how they were combined

Floating tensors are summed in float64 and stored in their own dtype; integer tensors
(counters, index buffers) must be equal in every checkpoint and are copied.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from flowkit.checkpoints import files as ckpt
from flowkit.errors import CheckpointError

__all__ = ["SAME_CONFIG_KEYS", "Averaged", "average_checkpoints", "average_run", "average_states",
           "choose_checkpoints", "default_out", "ema_val_losses"]

#: The meta.json entries that must be equal for checkpoints to be averaged: the network and
#: what its weights index (vocabulary, languages, latent statistics and size).
SAME_CONFIG_KEYS = ("model_config", "vocab", "languages", "latent_stats", "latent_dim")

#: How the weights are combined, as recorded in the provenance.
METHOD = "uniform mean of the raw and of the EMA weights (float64 sum, stored in each tensor's dtype)"


@attrs.frozen
class Averaged:
    """An averaged checkpoint: where it was written and what went into it."""

    path: Path
    chosen: tuple[tuple[int, Path], ...]
    how: str


def ema_val_losses(run_dir: str | Path) -> dict[int, float]:
    """``{step: val_loss_ema}`` from the eval records of ``run_dir/metrics.jsonl`` (the last
    record of a step wins, as a resumed run writes it again); {} when there is none."""
    out: dict[int, float] = {}
    try:
        lines = (Path(run_dir) / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line of a killed run
        if not isinstance(record, dict):
            continue
        value = record.get("val_loss_ema")
        if record.get("kind") == "eval" and isinstance(value, (int, float)) and "step" in record:
            out[int(record["step"])] = float(value)
    return out


def _valid(folder: Path) -> list[tuple[int, Path]]:
    return [(step, path) for step, path in ckpt.list_checkpoints(folder) if ckpt.verify_checkpoint(path) is None]


def choose_checkpoints(run_dir: str | Path, *, last: int | None = None, best: int | None = None
                       ) -> tuple[list[tuple[int, Path]], str]:
    """The checkpoints of ``run_dir`` to average, oldest first, and how they were chosen.

    ``last``: the ``last`` newest valid checkpoints of ``checkpoints/``. ``best``: the ``best``
    valid checkpoints of ``checkpoints/`` and ``best/`` (one per step) with the lowest EMA
    validation loss in ``metrics.jsonl``; a checkpoint whose step has no eval record cannot
    be ranked and is left out. Exactly one of them is given, >= 1.

    Raises:
        CheckpointError: neither or both given, a count below 1, not a run directory, or
            fewer checkpoints than asked (naming how many there are and ``Trainer.keep_last``).
    """
    root = Path(run_dir)
    if (last is None) == (best is None):
        raise CheckpointError("average: give one of --last K or --best K")
    k = int(last if last is not None else best)  # type: ignore[arg-type]
    option = "--last" if last is not None else "--best"
    if k < 1:
        raise CheckpointError(f"average: {option} {k} must be >= 1")
    if not (root / "checkpoints").is_dir():
        raise CheckpointError(f"average: {root} is not a run directory (no checkpoints/); give a run written by "
                              "flowkit train, or the checkpoint directories to average")
    found = _valid(root / "checkpoints")
    if last is not None:
        if len(found) < k:
            raise CheckpointError(
                f"average: {root}/checkpoints holds {len(found)} valid checkpoint(s), --last {k} asks for {k}; "
                "lower K, or keep more (Trainer.keep_last, Trainer.save_every) when training")
        return found[-k:], f"last {k}"
    steps = {step: path for step, path in _valid(root / "best")}
    steps.update(dict(found))  # a step in both: the one of checkpoints/ (the same weights)
    losses = ema_val_losses(root)
    ranked = sorted((losses[step], step) for step in steps if step in losses)
    if len(ranked) < k:
        raise CheckpointError(
            f"average: {root} has {len(ranked)} checkpoint(s) with an EMA validation loss in metrics.jsonl "
            f"(of {len(steps)} kept), --best {k} asks for {k}; lower K, or evaluate at the saves "
            "(Trainer.eval_every dividing Trainer.save_every) and keep more (Trainer.keep_last)")
    chosen = sorted(step for _, step in ranked[:k])
    return [(step, steps[step]) for step in chosen], f"best {k} by EMA validation loss"


def _config_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """The first of `SAME_CONFIG_KEYS` in which two metas differ (with the field inside a
    model config, when that is where), or None."""
    for key in SAME_CONFIG_KEYS:
        if a.get(key) != b.get(key):
            x, y = a.get(key), b.get(key)
            if isinstance(x, dict) and isinstance(y, dict):
                inner = next((f for f in sorted(set(x) | set(y)) if x.get(f) != y.get(f)), None)
                if inner is not None and key == "model_config":
                    return f"{key}.{inner} {x.get(inner)!r} vs {y.get(inner)!r}"
            return key
    return None


def average_states(states: Sequence[Mapping[str, torch.Tensor]], *, what: str = "model",
                   names: Sequence[str] = ()) -> dict[str, torch.Tensor]:
    """The element-wise mean of state dicts with the same keys and shapes.

    Floating tensors are summed in float64, divided by ``len(states)`` and cast back to
    their dtype; other tensors must be equal in every state and are copied from the last.
    ``names`` label the states in errors (e.g. checkpoint paths).

    Raises:
        CheckpointError: no state, another key set or shape, or unequal integer tensors.
    """
    if not states:
        raise CheckpointError("average: no checkpoint to average")
    labels = list(names) or [f"state {i}" for i in range(len(states))]
    first = states[0]
    out: dict[str, torch.Tensor] = {}
    for i, state in enumerate(states[1:], start=1):
        if set(state) != set(first):
            extra = sorted(set(state) ^ set(first))[0]
            raise CheckpointError(f"average: {labels[i]} and {labels[0]} hold other {what} keys (e.g. {extra!r}); "
                                  "average checkpoints of one model config")
    for key, ref in first.items():
        if not isinstance(ref, torch.Tensor):
            out[key] = ref
            continue
        for i, state in enumerate(states[1:], start=1):
            if state[key].shape != ref.shape:
                raise CheckpointError(f"average: {what} key {key!r} has shape {tuple(state[key].shape)} in {labels[i]} "
                                      f"and {tuple(ref.shape)} in {labels[0]}; average checkpoints of one model config")
        if ref.is_floating_point():
            total = torch.zeros(ref.shape, dtype=torch.float64)
            for state in states:
                total += state[key].detach().to(torch.float64)
            out[key] = (total / len(states)).to(ref.dtype)
        else:
            for i, state in enumerate(states[1:], start=1):
                if not torch.equal(state[key], ref):
                    raise CheckpointError(f"average: {what} key {key!r} (not floating) differs between {labels[0]} and "
                                          f"{labels[i]}; such tensors cannot be averaged")
            out[key] = states[-1][key].clone()
    return out


def _state_sha256(path: Path) -> str | None:
    try:
        manifest = json.loads((path / ckpt.MANIFEST_FILE).read_text(encoding="utf-8"))
        return str(manifest["files"][ckpt.STATE_FILE]["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def average_checkpoints(paths: Sequence[str | Path], out: str | Path, *, how: str = "given",
                        val_losses: Mapping[int, float] | None = None) -> Averaged:
    """Average the checkpoint directories ``paths`` into ``out/step-<newest step>``.

    ``how`` (e.g. "last 3") and ``val_losses`` (``{step: val_loss_ema}``) go into the
    provenance. The result is a checkpoint as `flowkit.checkpoints.files.save_checkpoint`
    writes it (see the module docstring for what it holds).

    Raises:
        CheckpointError: a path that is not a valid checkpoint, checkpoints of different
            configs (one line naming the two and the first differing entry), an adapter-only
            checkpoint (merge it first), or states that do not fit together.
    """
    if not paths:
        raise CheckpointError("average: no checkpoint to average")
    loaded = [ckpt.load_checkpoint(p) for p in paths]
    loaded.sort(key=lambda c: c.step)
    for c in loaded:
        if c.meta.get("adapter"):
            raise CheckpointError(f"average: {c.path} holds adapter weights only; merge it into a full checkpoint "
                                  "first (flowkit merge-adapter), then average the merged checkpoints")
        if "model" not in c.state or "ema" not in c.state:
            raise CheckpointError(f"average: {c.path} holds no model and EMA weights; give checkpoints written by "
                                  "flowkit train")
    ref = loaded[0]
    for c in loaded[1:]:
        diff = _config_difference(ref.meta, c.meta)
        if diff is not None:
            raise CheckpointError(f"average: {c.path} and {ref.path} come from different configs ({diff}); average "
                                  "checkpoints of one config")
    labels = [str(c.path) for c in loaded]
    model = average_states([c.state["model"] for c in loaded], what="model", names=labels)
    shadow = average_states([c.state["ema"]["shadow"] for c in loaded], what="EMA", names=labels)
    newest = loaded[-1]
    losses = dict(val_losses or {})
    provenance = {
        "how": how,
        "method": METHOD,
        "checkpoints": [
            {"path": str(c.path.resolve()), "step": c.step, "val_loss_ema": losses.get(c.step),
             "state_sha256": _state_sha256(c.path)}
            for c in loaded
        ],
    }
    meta = {k: v for k, v in newest.meta.items() if k not in ("format_version", "step", "pairing_totals")}
    meta["averaged"] = provenance
    state = {"model": model, "ema": {"num_updates": newest.state["ema"].get("num_updates", 0), "shadow": shadow}}
    path = ckpt.save_checkpoint(Path(out), newest.step, state, meta)
    return Averaged(path, tuple((c.step, c.path) for c in loaded), how)


def default_out(run_dir: str | Path, how: str) -> Path:
    """``RUN/averaged/<last3 | best3>``: beside the run's checkpoints, out of their pruning."""
    return Path(run_dir) / "averaged" / how.split(" by ")[0].replace(" ", "")


def average_run(run_dir: str | Path, *, last: int | None = None, best: int | None = None,
                out: str | Path | None = None) -> Averaged:
    """Choose (`choose_checkpoints`) and average (`average_checkpoints`) checkpoints of a run
    into ``out`` (default `default_out`: ``RUN/averaged/last<K>`` or ``best<K>``).

    Raises:
        CheckpointError: as those two raise.
    """
    chosen, how = choose_checkpoints(run_dir, last=last, best=best)
    target = Path(out) if out is not None else default_out(run_dir, how)
    return average_checkpoints([p for _, p in chosen], target, how=how, val_losses=ema_val_losses(run_dir))
