"""Start, continue and fine-tune training runs: everything between the CLI and `TrainingLoop.run`.

The story of a start, as torchtitan's ``main()`` tells it: parse the config, choose where
the run comes from (its *origin*), build the parts, restore the origin's state into them,
train::

    origin = plan_start(workspace, parsed, init_from)   # Fresh | Resume | InitFrom
    parts = build_parts(settings, origin, device, ctx,
                        config_names(getattr(parsed, "files", ())))   # data, model, EMA, optimizer, streams
    state = origin.restore(parts, settings, ctx)         # weights, counters, positions
    TrainingLoop(settings, parts, ...).run()

- `train` starts a run in ``--out``, or continues it when ``--out`` already holds a run
  of the same config (a requeued cluster job re-runs the same command): from its newest
  valid checkpoint, or from step 0 when none was written. ``init_from`` makes the new
  run start from another run's weights, EMA and latent stats.
- `resume` continues a run from its own ``config.gin``, bit-identically; with no valid
  checkpoint it starts the run again from step 0 (nothing can be lost).

Each holds ``run.lock`` for the whole run and writes the workspace files
(`flowkit.train.workspace`, with what they hold from `flowkit.train.run_records`). The
origins and `plan_start` live in `flowkit.train.origins`, `build_parts` in `flowkit.train.parts`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from flowkit import config as gin_config
from flowkit import registry
from flowkit.batching.host_memory import keep_freed_memory
from flowkit.checkpoints import files as checkpoint
from flowkit.console import say, warn
from flowkit.converters.cpu import choose_cpu_kernels, convert_cpu_kernels
from flowkit.errors import CheckpointError, ConfigError, DataError, FlowkitError, ResumeError
from flowkit.train import distributed
from flowkit.train.loop import TrainingLoop
from flowkit.train.origins import InitFrom, Origin, Resume, adapter_record, parent_path, plan_start, restore_origin
from flowkit.train.parts import RunParts, build_parts, config_names
from flowkit.train.run_records import checkpoint_meta, run_report, write_workspace
from flowkit.train.settings import Trainer
from flowkit.train.workspace import Workspace

__all__ = ["RunOutcome", "default_run_dir", "option_bindings", "restore_config_file", "resume",
           "tiny_lr_warning", "train"]


@attrs.frozen
class RunOutcome:
    """How a run ended: ``status`` "completed" or "interrupted" (a checkpoint was saved)."""

    run_dir: Path
    status: str
    step: int
    best_val_loss: float | None

    @property
    def interrupted(self) -> bool:
        return self.status == "interrupted"




# ---- the commands --------------------------------------------------------------------------


def default_run_dir(config: Path) -> Path:
    """``runs/<config stem>-<YYYYmmdd-HHMMSS>`` under the working directory."""
    return Path("runs") / f"{Path(config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"--device {name!r} is not a device; use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {name} but no CUDA device is visible; use --device cpu")
    return device


def option_bindings(data: Sequence[Path], steps: int | None) -> list[str]:
    """``--data`` and ``--steps`` as gin bindings (they apply after the files and ``-b``).

    Raises:
        DataError: a ``--data`` path that does not exist (checked before the run directory
            is made, so a typo leaves nothing behind).
    """
    missing = [str(p) for p in data if not Path(p).exists()]
    if missing:
        raise DataError(f"--data {missing[0]}: no such store (the path does not exist); "
                        "give a store made by flowkit prepare (NAME.zarr)")
    seen: dict[str, Path] = {}
    for p in data:
        real = os.path.realpath(p)
        if real in seen:
            raise DataError(f"--data {seen[real]} and --data {p} are the same store ({real}); refused, not "
                            "de-duplicated: give each store once (read twice, its segments would count double)")
        seen[real] = Path(p)
    out = []
    if data:
        paths = ", ".join(repr(str(Path(p).resolve())) for p in data)
        out.append(f"Trainer.data = [{paths}]")
    if steps is not None:
        out.append(f"Trainer.steps = {int(steps)}")
    return out


@distributed.name_rank_in_errors
def train(
    config_files: Sequence[str | Path],
    bindings: Sequence[str] = (),
    *,
    data: Sequence[Path] = (),
    out: Path,
    steps: int | None = None,
    device: str = "auto",
    init_from: Path | None = None,
) -> RunOutcome:
    """Start the run of gin ``config_files`` and ``bindings`` in ``out``, or continue the
    one already there with the same config (see `plan_start`).

    ``init_from`` (a checkpoint or run directory) starts the new run from that run's
    weights, EMA and latent stats.

    Raises:
        ResumeError: ``out`` holds a run of another config, or the model differs from
            the ``init_from`` parent's beyond dur_cond "none" -> "emotion".
        ConfigError, DataError, CheckpointError, TrainingError: see `flowkit.errors`.
    """
    workspace = Workspace(Path(out))
    from flowkit import hub

    if init_from is not None and hub.is_hub(init_from):  # hf://OWNER/REPO/RUN: an imported run kept on the hub
        init_from = hub.resolve(init_from, kind="dir")
    if init_from is not None and not Path(init_from).exists():
        raise CheckpointError(f"{init_from} is not a checkpoint directory (it does not exist); "
                              "give RUN or RUN/checkpoints/step-N")
    extra = [*bindings, *option_bindings(data, steps)]
    parsed = gin_config.parse(config_files, extra)
    network, line = _parent_network(Path(init_from)) if init_from is not None else ([], None)
    if network:
        parsed = gin_config.parse(config_files, [*extra, *network])
    origin = plan_start(workspace, parsed, init_from)
    if line is not None and isinstance(origin, InitFrom):
        say(line)
    return _launch(workspace, parsed, _device(device), origin)


#: The model fields init-from takes from the parent: the network's shape and arithmetic,
#: which its weights fix. The config keeps ``dropout`` (a training setting), and chooses
#: ``text_path``, ``dur_cond`` and ``conditions``, checked by `compatibility.check_init_from_model`.
PARENT_NETWORK = ("preset", "dim", "depth", "heads", "ff_mult", "text_dim", "conv_layers", "dur_hidden", "arch",
                  "conv_pos_kernel", "long_skip")


def _parent_network(parent: Path) -> tuple[list[str], str | None]:
    """Bindings that make the config's ``model.dit`` the parent's network (`PARENT_NETWORK`,
    every field, when the config differs in any), and the line that names each value
    replaced (None: nothing replaced). The config's dropout is kept as it resolves now (a preset
    change would change it).

    Run after a parse (the config's model is built from the bindings in force); the
    bindings go last, so the run's config.gin records the network it trains.
    """
    from flowkit.model.dit import DiTConfig

    try:
        meta = json.loads((parent_path(parent) / checkpoint.META_FILE).read_text(encoding="utf-8"))
        theirs = DiTConfig.from_dict(meta["model_config"]).to_dict()
    except (OSError, ValueError, KeyError, TypeError, FlowkitError):
        return [], None  # an unreadable parent is refused, with its reason, when it is loaded
    model = registry.build("model", "dit")
    if not isinstance(model, DiTConfig):
        return [], None
    mine = model.to_dict()
    changed = [k for k in PARENT_NETWORK if mine.get(k) != theirs.get(k)]
    if not changed:
        return [], None
    # every field, not only the changed ones: a preset bound alone would move the sizes
    # the config leaves to its preset
    out = [f"model.dit.{k} = {theirs[k]!r}" for k in PARENT_NETWORK]
    out.append(f"model.dit.dropout = {mine['dropout']!r}")
    text = ", ".join(f"{k} {mine.get(k)!r} -> {theirs[k]!r}" for k in changed)
    return out, (f"init-from: the model is the parent's network ({text}); the config keeps model.dit.dropout = "
                 f"{mine['dropout']!r} and chooses text_path, dur_cond ('none' -> 'emotion') and conditions "
                 "(False -> True); for another network, train without --init-from")


@distributed.name_rank_in_errors
def resume(run_dir: Path, *, steps: int | None = None, bindings: Sequence[str] = (), device: str = "auto",
           restore_config: bool = False) -> RunOutcome:
    """Continue ``run_dir`` from its newest valid checkpoint with its own ``config.gin``
    (from step 0 when it has none).

    ``restore_config``: when ``config.gin`` is gone, write it back first from the config
    the newest valid checkpoint holds (`restore_config`).

    Raises:
        ResumeError: not a run directory, config.gin missing (the message says how to
            restore it), a config change outside the allow-list, changed data, or a
            checkpoint past the configured steps.
    """
    workspace = Workspace(Path(run_dir))
    if not Path(run_dir).exists():
        raise ResumeError(f"{run_dir} does not exist; give a run directory written by flowkit train")
    workspace.check_layout()
    if not workspace.config.is_file():
        found = _newest_checkpoint_anywhere(workspace)
        if found is None:
            raise ResumeError(f"{run_dir} is not a flowkit run directory (no config.gin); start one with flowkit train")
        if not restore_config:
            raise ResumeError(
                f"{run_dir} has checkpoints but no config.gin (deleted?); every checkpoint holds the run's config: "
                f"`flowkit resume {run_dir} --restore-config` writes it back from {found.parent.name}/{found.name} "
                "and continues"
            )
        restore_config_file(workspace)
    parsed = gin_config.parse([workspace.config], [*bindings, *option_bindings((), steps)])
    return _launch(workspace, parsed, _device(device), plan_start(workspace, parsed, command="resume"))


def _newest_checkpoint_anywhere(workspace: Workspace) -> Path | None:
    """The newest valid checkpoint of ``checkpoints/``, else of ``best/``; None when there is none."""
    for folder in (workspace.checkpoints, workspace.best):
        found, _ = checkpoint.find_latest(folder)
        if found is not None:
            return found
    return None


def restore_config_file(workspace: Workspace) -> Path:
    """Write the run's ``config.gin`` back from the config its newest valid checkpoint holds
    (``meta.json`` ``config_text``: what the checkpoint was trained with); one line says so.

    Returns:
        The checkpoint it came from.

    Raises:
        ResumeError: no valid checkpoint, or config.gin exists (nothing is overwritten).
        TrainingError: the run directory is locked by a live process.
    """
    from flowkit.io import atomic_write_text

    with workspace.lock():
        if workspace.config.is_file():
            raise ResumeError(f"{workspace.config} exists; --restore-config writes it only when it is missing")
        found = _newest_checkpoint_anywhere(workspace)
        if found is None:
            raise ResumeError(f"{workspace.root} has no valid checkpoint to restore config.gin from")
        meta = json.loads((found / checkpoint.META_FILE).read_text(encoding="utf-8"))
        atomic_write_text(workspace.config, meta["config_text"])
    say(f"resume: restored {workspace.config} from {found.parent.name}/{found.name}/{checkpoint.META_FILE}")
    return found


# ---- one run, start to end -----------------------------------------------------------------


def _loggers(settings: Trainer) -> list[Any]:
    jsonl = registry.get("logger", "jsonl").obj
    loggers = list(settings.loggers)
    if not any(isinstance(lg, jsonl) for lg in loggers):
        loggers.append(jsonl())
    return loggers


def _launch(workspace: Workspace, parsed: Any, device: torch.device, origin: Origin) -> RunOutcome:
    settings = Trainer()
    if settings.keep_freed_memory:
        keep_freed_memory()  # before any other thread allocates (see flowkit.batching.host_memory)
    if isinstance(origin, Resume) and origin.loaded.step == settings.steps:
        # nothing to train: touch nothing (no resume record, no rewritten report), so a
        # restart loop can run the same command until the run is done
        say(f"{workspace.root} is already complete ({settings.steps}/{settings.steps} steps); train longer "
             f"with `flowkit resume {workspace.root} --steps N`")
        return RunOutcome(workspace.root, "completed", settings.steps,
                          origin.loaded.meta.get("counters", {}).get("best_val_loss"))
    # Under torchrun: join the process group; rank 0 alone holds run.lock and writes the run.
    ctx, device = distributed.setup(device, timeout_s=settings.dist_timeout_s)
    ok, started, before = False, [], _listing(workspace.root)
    # A start that fails before its first step leaves nothing of its own behind.
    undo = ctx.is_main and not isinstance(origin, Resume)
    try:
        if ctx.is_main:
            with workspace.lock() as lock:
                try:
                    outcome = _run(workspace, parsed, settings, device, origin, ctx, lock_takeover=lock.took_over,
                                   started=started)
                except BaseException:
                    if undo and not started:
                        _remove_new_files(workspace.root, before)
                    raise
        else:
            outcome = _run(workspace, parsed, settings, device, origin, ctx, lock_takeover=None, started=started)
        ok = True
        return outcome
    except BaseException:
        if undo and not started and before is None:
            with contextlib.suppress(OSError):
                workspace.root.rmdir()  # empty once run.lock is released
        raise
    finally:
        distributed.teardown(ctx, ok=ok)


def _run(workspace: Workspace, parsed: Any, settings: Trainer, device: torch.device, origin: Origin,
         ctx: distributed.DistContext, *, lock_takeover: dict[str, Any] | None, started: list[bool]) -> RunOutcome:
    """Build, restore, write the workspace, train; ``started`` gets an entry once the loop
    runs (before it, a failure leaves nothing of this start behind: `_launch`)."""
    parts = build_parts(settings, origin, device, ctx, config_names(getattr(parsed, "files", ())))
    loggers: list[Any] = []
    try:
        restored = restore_origin(origin, parts, settings, ctx)  # Trainer.adapter inserted where set
        step = restored.counters.step
        meta = checkpoint_meta(parsed, settings, parts, restored, ctx)
        if adapter_record(parts.model) is not None:
            meta["adapter"] = adapter_record(parts.model)
        meta["cpu_kernels"] = _maybe_convert_cpu(parts, settings, device, origin, ctx)
        if ctx.is_main:
            write_workspace(workspace, parsed, settings, parts, device, meta, origin,
                            lock_takeover=lock_takeover, step=step)
        if ctx.is_main and not origin.resumed:
            maybe_warn_tiny_lr(settings)
        loggers = _loggers(settings) if ctx.is_main else []  # only rank 0 logs
        for logger in loggers:
            logger.open(workspace.root, resumed=origin.resumed, total_steps=settings.steps, start_step=step)
        loop = TrainingLoop(
            settings, parts, workspace=workspace, loggers=loggers, device=device, meta=meta,
            counters=restored.counters, pairing_totals=restored.pairing_totals, resumed=origin.resumed, dist=ctx,
            ddp=distributed.wrap_model(ctx, parts.model, device,
                                       find_unused_parameters=settings.ddp_find_unused_parameters),
        )
    except BaseException:
        for logger in loggers:
            with contextlib.suppress(Exception):
                logger.close()
        parts.close()
        raise
    started.append(True)
    try:
        try:
            if isinstance(origin, Resume):
                loop.log({"kind": "event", "step": step, "event": "resumed", "checkpoint": str(origin.loaded.path)})
            status = loop.run()
        finally:
            for logger in loggers:
                logger.close()
            if ctx.is_main:
                # A full disk must not replace the error that says why the run stopped.
                with contextlib.suppress(OSError):
                    workspace.write_report(run_report(workspace, settings, loop))
        return RunOutcome(workspace.root, status, loop.counters.step, loop.counters.best_val_loss)
    finally:
        parts.close()


#: A run whose learning rate never reaches this fraction of ``Trainer.lr`` gets a warning at start.
TINY_LR_FRACTION = 0.1


def tiny_lr_warning(settings: Trainer) -> str | None:
    """The warning for a run whose lr schedule keeps the learning rate below
    `TINY_LR_FRACTION` of ``Trainer.lr`` over all its ``Trainer.steps`` updates (a warm-up
    longer than the run: F5-TTS's 20,000 warm-up updates over a 200-step fine-tune peak at
    1 % of the lr), or None. The schedule is sampled at up to ~10,000 updates."""
    total = int(settings.steps)
    if total < 1:
        return None
    stride = max(1, total // 10000)
    updates = [*range(0, total, stride), total - 1]
    peak_at = max(updates, key=lambda u: float(settings.lr_schedule(u, total)))
    peak = float(settings.lr_schedule(peak_at, total))
    if peak >= TINY_LR_FRACTION:
        return None
    name = next((c.name for c in registry.components("lr_schedule") if isinstance(c.obj, type)
                 and isinstance(settings.lr_schedule, c.obj)), None)
    warmup = getattr(settings.lr_schedule, "warmup_updates", None)
    fix = "shorten the schedule's warm-up, or raise Trainer.steps"
    if name is not None and isinstance(warmup, int) and warmup > total:
        fix = (f"lr_schedule.{name}.warmup_updates = {warmup} is longer than the run: scale it to the run, e.g. "
               f"-b \"lr_schedule.{name}.warmup_updates = {max(1, total // 10)}\" (10 %)")
    return (f"the learning rate stays below {TINY_LR_FRACTION:.0%} of Trainer.lr = {settings.lr:g} for the whole run: "
            f"it peaks at {settings.lr * peak:.3g} (update {peak_at + 1} of {total}); {fix}")


def maybe_warn_tiny_lr(settings: Trainer) -> None:
    """Print `tiny_lr_warning` (one ``warning:`` line) when it applies."""
    line = tiny_lr_warning(settings)
    if line is not None:
        warn(line)


def _listing(root: Path) -> set[str] | None:
    """The entries of ``root`` before a start wrote into it (None: it did not exist)."""
    return set(os.listdir(root)) if root.is_dir() else None


def _remove_new_files(root: Path, before: set[str] | None) -> None:
    """Undo what a start that failed before its first step wrote: the entries it added to
    ``root`` (all of them if it made the directory), ``run.lock`` aside (its holder
    releases it); nothing older is touched."""
    for name in set(os.listdir(root)) - (before or set()) - {"run.lock"} if root.is_dir() else ():
        path = root / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _maybe_convert_cpu(parts: RunParts, settings: Trainer, device: torch.device, origin: Origin,
                       ctx: distributed.DistContext) -> dict | None:
    """On a CPU run with ``Trainer.cpu_kernels``, convert the model to CPU layers
    (`flowkit.converters.cpu`) with this run's kernels: measured at the model's shapes, or a
    resume's recorded ones, so it trains the same bits; print them in one line and return the
    record for the checkpoints' meta (None: the model keeps torch's own layers). Ranks of a
    distributed run take the defaults, which all ranks share."""
    if device.type != "cpu" or not settings.cpu_kernels:
        return None
    resumed = isinstance(origin, Resume)
    recorded = origin.loaded.meta.get("cpu_kernels") if resumed else None
    choice = choose_cpu_kernels(parts.model, resumed=resumed, recorded=recorded, measure=ctx.world_size == 1)
    convert_cpu_kernels(parts.model, choice.kernels)
    if ctx.is_main:
        say(choice.line())
    return choice.record()
