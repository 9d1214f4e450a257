"""Checkpoints: one directory per step, committed atomically, verified by checksums.

Layout of ``checkpoints/step-00000123/``:

    state.pt        tensors and counters (model, EMA, optimizer, RNG states, sampler, ...)
    meta.json       plain JSON about the run (config text, latent stats, vocab, languages,
                    model config, data fingerprint, pairing totals, best validation loss)
    manifest.json   sha256 and size of each file above
    COMPLETE        written last; a directory without it was never committed

A save writes everything into a hidden ``.step-00000123.partial-<pid>`` directory,
fsyncs each file, writes the manifest and then the marker, fsyncs the directory, renames
it to its final name and fsyncs the parent: a reader sees a whole checkpoint or none.
Older checkpoints beyond ``keep_last`` are deleted only after the new one is committed,
so a kill -9 at any moment leaves at least one valid checkpoint behind.

On load, the newest checkpoint whose marker and checksums hold is used; a corrupt or
truncated newer one is skipped and reported (`find_latest`). ``state.pt`` loads with
``torch.load(weights_only=True)``: it holds tensors and plain Python values only.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import torch

from flowkit.errors import CheckpointError
from flowkit.io import as_os_error, atomic_write_bytes, file_sha256, fsync_dir

__all__ = [
    "FORMAT_VERSION",
    "LoadedCheckpoint",
    "checkpoint_name",
    "export_safetensors",
    "find_latest",
    "list_checkpoints",
    "load_checkpoint",
    "load_strict",
    "resolve_checkpoint",
    "save_checkpoint",
    "verify_checkpoint",
]

FORMAT_VERSION = 1
STATE_FILE = "state.pt"
META_FILE = "meta.json"
MANIFEST_FILE = "manifest.json"
COMPLETE_FILE = "COMPLETE"
_NAME = re.compile(r"^step-(\d{8,})$")


def checkpoint_name(step: int) -> str:
    """``step-00000123``: zero-padded so names sort by step."""
    return f"step-{step:08d}"


@attrs.frozen
class LoadedCheckpoint:
    """A verified checkpoint: ``state`` from ``state.pt`` and ``meta`` from ``meta.json``."""

    path: Path
    step: int
    state: dict[str, Any]
    meta: dict[str, Any]


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def save_checkpoint(
    directory: str | os.PathLike[str],
    step: int,
    state: Mapping[str, Any],
    meta: Mapping[str, Any],
    *,
    keep_last: int | None = None,
) -> Path:
    """Commit ``state`` and ``meta`` as ``directory/step-<step>`` and prune old checkpoints.

    ``keep_last`` (>= 1, None keeps all) counts committed checkpoints including this one.
    An existing checkpoint of the same step is replaced only after the new one is complete.

    Raises:
        OSError: as the file system reports it (ENOSPC on a full disk); the partial
            directory is removed and older checkpoints are untouched.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    final = root / checkpoint_name(step)
    partial = root / f".{final.name}.partial-{os.getpid()}"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()
    try:
        with (partial / STATE_FILE).open("wb") as f:
            try:
                torch.save(dict(state), f)
            except RuntimeError as exc:  # torch's writer loses the errno of a full disk: told apart here,
                raise as_os_error(exc, partial) from exc  # before the partial folder frees the space
            f.flush()
            os.fsync(f.fileno())
        meta_full = {"format_version": FORMAT_VERSION, "step": step, **meta}
        _write_synced(partial / META_FILE, (json.dumps(meta_full, indent=2, sort_keys=True) + "\n").encode())
        files = {
            name: {"sha256": file_sha256(partial / name), "bytes": (partial / name).stat().st_size}
            for name in (STATE_FILE, META_FILE)
        }
        _write_synced(partial / MANIFEST_FILE, (json.dumps({"files": files}, indent=2) + "\n").encode())
        _write_synced(partial / COMPLETE_FILE, b"")
        fsync_dir(partial)
        if final.exists():
            # Same step saved again (e.g. best/): move the old one aside first, drop it after.
            trash = root / f".{final.name}.old-{os.getpid()}"
            os.replace(final, trash)
            os.replace(partial, final)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(partial, final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    # Leftovers of saves killed mid-write (kill -9): one writer holds run.lock, so every
    # hidden partial or moved-aside directory here is a dead process's.
    for leftover in [*root.glob(".step-*.partial-*"), *root.glob(".step-*.old-*")]:
        shutil.rmtree(leftover, ignore_errors=True)
    if keep_last is not None:
        for _, old in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
        fsync_dir(root)
    return final


def list_checkpoints(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(step, path)`` of every committed-looking checkpoint directory, oldest first."""
    root = Path(directory)
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        match = _NAME.match(entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def verify_checkpoint(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a valid checkpoint (missing marker, bad checksum, ...), or None."""
    root = Path(path)
    if not (root / COMPLETE_FILE).is_file():
        return "no COMPLETE marker (the save was interrupted)"
    try:
        manifest = json.loads((root / MANIFEST_FILE).read_text())
    except (OSError, ValueError) as exc:
        return f"unreadable {MANIFEST_FILE}: {exc}"
    for name, entry in manifest.get("files", {}).items():
        file = root / name
        if not file.is_file():
            return f"{name} is missing"
        if file.stat().st_size != entry["bytes"]:
            return f"{name} has {file.stat().st_size} bytes, the manifest says {entry['bytes']} (truncated)"
        if file_sha256(file) != entry["sha256"]:
            return f"{name} does not match its sha256 in {MANIFEST_FILE} (corrupt)"
    return None


def find_latest(directory: str | os.PathLike[str], *, before: Path | None = None
                ) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest valid checkpoint in ``directory`` and the newer ones skipped, with reasons;
    ``before``: only checkpoints of a lower step than that checkpoint's."""
    match = None if before is None else _NAME.match(before.name)
    limit = int(match.group(1)) if match else None
    skipped: list[tuple[Path, str]] = []
    for step, path in reversed(list_checkpoints(directory)):
        if limit is not None and step >= limit:
            continue
        reason = verify_checkpoint(path)
        if reason is None:
            return path, skipped
        skipped.append((path, reason))
    return None, skipped


def resolve_checkpoint(path: str | os.PathLike[str]) -> Path:
    """A checkpoint directory from a checkpoint or run directory (best, else newest valid).
    ``hf://OWNER/REPO/PATH`` names one kept on the Hugging Face Hub (`flowkit.hub.resolve`:
    the cached folder, fetched first when missing and the hub may be reached).

    Raises:
        CheckpointError: the path does not exist, or holds no valid checkpoint; an hf://
            folder missing from the cache while offline.
        ConfigError: a malformed hf:// reference.
    """
    from flowkit import hub

    root = hub.resolve(path, kind="dir")
    if not root.exists():
        raise CheckpointError(f"{root}: no such checkpoint or run directory (check the path; runs are under runs/ "
                              "by default)")
    if (root / COMPLETE_FILE).is_file() or (root / META_FILE).is_file():
        return root
    for sub in ("best", "checkpoints"):
        found, _ = find_latest(root / sub)
        if found is not None:
            return found
    raise CheckpointError(
        f"{root} holds no valid checkpoint (looked for best/ and checkpoints/step-*); give a run "
        "directory with a checkpoint or a checkpoint directory"
    )


def load_checkpoint(path: str | os.PathLike[str], *, map_location: str | torch.device = "cpu") -> LoadedCheckpoint:
    """Verify and load a checkpoint directory.

    Raises:
        CheckpointError: the path is not a checkpoint, fails verification, or cannot be read.
    """
    root = Path(path)
    if not root.is_dir():
        raise CheckpointError(f"{root} is not a checkpoint directory (expected .../checkpoints/step-NNNNNNNN)")
    reason = verify_checkpoint(root)
    if reason is not None:
        raise CheckpointError(f"{root}: {reason}; use an older checkpoint of the run")
    try:
        meta = json.loads((root / META_FILE).read_text())
        state = torch.load(root / STATE_FILE, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:  # weights_only refused an object: never unpickled, and no torch advice
        raise CheckpointError(
            f"{root}: {STATE_FILE} holds pickled Python objects, which flowkit never loads (a checkpoint holds "
            "tensors and plain values only); use another checkpoint of the run") from exc
    except Exception as exc:  # torch raises several types for a bad archive
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(f"{root}: cannot read the checkpoint ({type(exc).__name__}: {first})") from exc
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{root}: checkpoint format {meta.get('format_version')} is not supported "
            f"(this flowkit reads format {FORMAT_VERSION})"
        )
    return LoadedCheckpoint(path=root, step=int(meta["step"]), state=state, meta=meta)


def load_strict(
    module: torch.nn.Module,
    state: Mapping[str, torch.Tensor],
    *,
    what: str,
    source: Path,
    allow_missing: frozenset[str] = frozenset(),
) -> None:
    """Load ``state`` into ``module``; every key must match except ``allow_missing``.

    Raises:
        CheckpointError: naming the first missing or unexpected key, a shape mismatch, or a
            weight holding NaN or infinity (a damaged or diverged checkpoint).
    """
    own = module.state_dict()
    expected = set(own)
    missing = sorted(expected - set(state) - allow_missing)
    unexpected = sorted(set(state) - expected)
    if missing:
        raise CheckpointError(
            f"{source}: {what} key {missing[0]!r} is missing ({len(missing)} missing); the "
            "checkpoint comes from another model config"
        )
    if unexpected:
        raise CheckpointError(
            f"{source}: {what} key {unexpected[0]!r} is unexpected ({len(unexpected)} unexpected); "
            "the checkpoint comes from another model config"
        )
    for key, value in state.items():
        if own[key].shape != value.shape:
            raise CheckpointError(
                f"{source}: {what} key {key!r} has shape {tuple(value.shape)}, the model "
                f"expects {tuple(own[key].shape)}; use the checkpoint's model config"
            )
    for key in sorted(state):
        value = state[key]
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise CheckpointError(
                f"{source}: {what} weight {key!r} holds {int((~torch.isfinite(value)).sum())} NaN or infinite "
                f"value(s); the checkpoint is damaged or comes from a diverged run: use an older checkpoint"
            )
    module.load_state_dict(dict(state), strict=not allow_missing)


def export_safetensors(
    checkpoint: str | os.PathLike[str],
    out: str | os.PathLike[str],
    which: str = "ema",
) -> Path:
    """Write the inference weights of ``checkpoint`` as one safetensors file.

    ``which`` is ``"ema"`` (the EMA weights, what inference should use) or ``"raw"``. The
    file's metadata says which, with the step, model config, latent stats, vocab and
    languages (JSON strings) so the weights are usable on their own.

    Raises:
        CheckpointError: an invalid checkpoint or an unknown ``which``.
    """
    from safetensors.torch import save as save_safetensors

    if which not in ("ema", "raw"):
        raise CheckpointError(f"export which={which!r} is not known; use 'ema' or 'raw'")
    loaded = load_checkpoint(checkpoint)
    tensors = dict(loaded.state["model"])
    if which == "ema":
        tensors.update(loaded.state["ema"]["shadow"])
    tensors = {k: v.detach().contiguous().clone() for k, v in tensors.items()}
    meta = {
        "format": "flowkit",
        "weights": which,
        "step": str(loaded.step),
        **{
            key: json.dumps(loaded.meta.get(key), sort_keys=True)
            for key in ("model_config", "latent_stats", "vocab", "languages", "data_fingerprint")
        },
    }
    target = Path(out)
    atomic_write_bytes(target, save_safetensors(tensors, metadata=meta))
    return target
