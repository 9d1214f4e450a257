"""Start, resume and fine-tune training runs: everything between the CLI and `TrainingLoop.run`.

- `train`: a new run from gin files into an empty (or checkpoint-free) directory.
- `resume`: continue a run from its newest valid checkpoint, bit-identically; the run's
  ``config.gin`` is re-read and compared with the checkpoint's config
  (`flowkit.train.compatibility`), as are the data (fingerprint) and the step count.
- `init_from`: a new run whose model, EMA, latent stats, vocab and languages come from
  another run's checkpoint; optimizer, lr schedule, sampler and random streams start fresh.

Each takes ``run.lock`` for the whole run and writes the workspace files
(`flowkit.train.workspace`).
"""

from __future__ import annotations

import contextlib
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from flowkit import config as gin_config
from flowkit import registry
from flowkit.batching.builder import BatchBuilder
from flowkit.batching.collate import CFGDrop
from flowkit.batching.pairing import PairingCounts
from flowkit.batching.samplers import BatchStream
from flowkit.data.encoder_records import vocoder_record
from flowkit.errors import CheckpointError, ConfigError, DataError, ResumeError
from flowkit.loggers.jsonl import truncate_after_step
from flowkit.train import checkpoint, compatibility, distributed
from flowkit.train.ema import EMA
from flowkit.train.evaluation import Evaluator
from flowkit.train.loop import Counters, TrainingLoop
from flowkit.train.optimization import build_optimizer
from flowkit.train.randomness import RandomStreams, derive_seed, seed_globals
from flowkit.train.settings import Trainer
from flowkit.train.workspace import Workspace, git_commit

__all__ = ["RunOutcome", "default_run_dir", "init_from", "resume", "train"]


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


@attrs.frozen
class _Origin:
    """Where the weights come from: nothing (fresh), a resumed checkpoint, or a parent."""

    kind: str  # "fresh" | "resume" | "init_from"
    loaded: checkpoint.LoadedCheckpoint | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    allowed_changes: dict[str, Any] = attrs.Factory(dict)


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


def _extra_bindings(data: Sequence[Path], steps: int | None) -> list[str]:
    """``--data`` and ``--steps`` as gin bindings (they apply after the files and ``-b``).

    Raises:
        DataError: a ``--data`` path that does not exist (checked before the run directory
            is made, so a typo leaves nothing behind).
    """
    missing = [str(p) for p in data if not Path(p).exists()]
    if missing:
        raise DataError(f"--data {missing[0]}: no such store (the path does not exist); give a store made by flowkit prepare (NAME.zarr)")
    out = []
    if data:
        paths = ", ".join(repr(str(Path(p).resolve())) for p in data)
        out.append(f"Trainer.data = [{paths}]")
    if steps is not None:
        out.append(f"Trainer.steps = {int(steps)}")
    return out


def _refuse_existing(workspace: Workspace) -> None:
    existing = checkpoint.list_checkpoints(workspace.checkpoints)
    if existing:
        raise ResumeError(
            f"{workspace.root} already holds checkpoints (newest step {existing[-1][0]}); continue "
            f"it with `flowkit resume {workspace.root}`, or choose another --out"
        )


@distributed.name_rank_in_errors
def train(
    config_files: Sequence[str | Path],
    bindings: Sequence[str] = (),
    *,
    data: Sequence[Path] = (),
    out: Path,
    steps: int | None = None,
    device: str = "auto",
) -> RunOutcome:
    """Start a new run in ``out`` from gin ``config_files`` and ``bindings``.

    Raises:
        ResumeError: ``out`` already holds checkpoints.
        ConfigError, DataError, CheckpointError, TrainingError: see `flowkit.errors`.
    """
    workspace = Workspace(Path(out))
    _refuse_existing(workspace)
    parsed = gin_config.parse(config_files, [*bindings, *_extra_bindings(data, steps)])
    return _launch(workspace, parsed, _device(device), _Origin("fresh"))


@distributed.name_rank_in_errors
def resume(run_dir: Path, *, steps: int | None = None, bindings: Sequence[str] = (), device: str = "auto") -> RunOutcome:
    """Continue ``run_dir`` from its newest valid checkpoint.

    Raises:
        ResumeError: no valid checkpoint, a config change outside the allow-list, changed
            data, or a checkpoint past the configured steps.
    """
    workspace = Workspace(Path(run_dir))
    if not Path(run_dir).exists():
        raise ResumeError(f"{run_dir} does not exist; give a run directory written by flowkit train")
    if not workspace.config.is_file():
        raise ResumeError(f"{run_dir} is not a flowkit run directory (no config.gin); start one with flowkit train")
    path, skipped = checkpoint.find_latest(workspace.checkpoints)
    if path is None:
        reasons = "; ".join(f"{p.name}: {r}" for p, r in skipped) or "none written yet"
        raise ResumeError(f"{run_dir} has no valid checkpoint ({reasons}); start it again with flowkit train")
    for bad, reason in skipped:
        # Loud, because the steps since ``path`` will be trained again.
        from flowkit.console import err_console

        err_console.print(f"warning: skipping checkpoint {bad}: {reason}; resuming from {path.name}",
                          markup=False, highlight=False, soft_wrap=True)
    loaded = checkpoint.load_checkpoint(path)
    parsed = gin_config.parse([workspace.config], [*bindings, *_extra_bindings((), steps)])
    allowed = compatibility.check_resume_config(loaded.meta["config_text"], parsed.text, run_dir=str(run_dir))
    total = Trainer().steps
    if loaded.step == total:
        # nothing to train: touch nothing (no resume record, no rewritten report), so a
        # restart loop can call resume until the run is done
        from flowkit.console import console

        console.print(f"{run_dir} is already complete ({loaded.step}/{total} steps); train longer with "
                      f"`flowkit resume {run_dir} --steps N`", markup=False, highlight=False, soft_wrap=True)
        return RunOutcome(Path(run_dir), "completed", loaded.step, loaded.meta.get("counters", {}).get("best_val_loss"))
    origin = _Origin("resume", loaded, tuple((str(p), r) for p, r in skipped), allowed)
    return _launch(workspace, parsed, _device(device), origin)


@distributed.name_rank_in_errors
def init_from(
    parent: Path,
    config_files: Sequence[str | Path],
    bindings: Sequence[str] = (),
    *,
    data: Sequence[Path] = (),
    out: Path,
    steps: int | None = None,
    device: str = "auto",
) -> RunOutcome:
    """A new run in ``out`` starting from the weights, EMA and latent stats of ``parent``.

    ``parent`` is a checkpoint directory or a run directory (its newest valid checkpoint).

    Raises:
        ResumeError: ``out`` holds checkpoints, or the model config differs from the
            parent's beyond dur_cond "none" -> "emotion".
        CheckpointError: the parent is not a valid checkpoint, or its keys do not fit.
    """
    parent = Path(parent)
    if (parent / "checkpoints").is_dir():
        found, _ = checkpoint.find_latest(parent / "checkpoints")
        if found is None:
            raise CheckpointError(f"{parent} has no valid checkpoint to start from")
        parent = found
    loaded = checkpoint.load_checkpoint(parent)
    workspace = Workspace(Path(out))
    _refuse_existing(workspace)
    parsed = gin_config.parse(config_files, [*bindings, *_extra_bindings(data, steps)])
    return _launch(workspace, parsed, _device(device), _Origin("init_from", loaded))


# ---- composition -------------------------------------------------------------------------


def _config_names(files: Any) -> str:
    """The config files of a start as the user would type them (relative to the working directory when inside it)."""
    names = []
    for f in files:
        try:
            names.append(str(Path(f).resolve().relative_to(Path.cwd())))
        except ValueError:
            names.append(str(f))
    return " ".join(names) or "the config"


def _open_data(settings: Trainer, aligned: bool, configs: str = "the config") -> tuple[Any, Any]:
    from flowkit.data.dataset import LatentDataset

    stores = [Path(p) for p in settings.data]
    if not stores:
        from flowkit.data.demo import demo_store_path

        stores = [demo_store_path()]
    train_set = LatentDataset.open(stores, "train", min_frames=settings.min_frames, require_units=aligned)
    if len(train_set) == 0:
        counts = train_set.report.to_dict()
        train_set.close()
        by_reason = train_set.report.counts()
        if aligned and set(by_reason) == {"missing_units"}:
            raise DataError(
                f"{configs} uses model.dit.text_path = 'aligned', which needs unit timings; none of the "
                f"{by_reason['missing_units']} segments of {', '.join(map(str, stores))} has them: prepare with "
                "--align energy or --textgrids DIR"
            )
        raise DataError(
            f"no usable training segment in {', '.join(map(str, stores))} ({counts}); check the "
            "stores' split column and data_rejections.jsonl"
        )
    if settings.vocoder is not None:
        from flowkit.data.encoder_records import check_vocoder

        try:
            check_vocoder(settings.vocoder, train_set.store_attrs.get("encoder") or {},
                          source=f"the latents of {train_set.paths[0]}")
        except Exception:
            train_set.close()
            raise
    val_set = LatentDataset.open(stores, "val", min_frames=settings.min_frames, require_units=aligned)
    return train_set, val_set


def _loggers(settings: Trainer) -> list[Any]:
    jsonl = registry.get("logger", "jsonl").obj
    loggers = list(settings.loggers)
    if not any(isinstance(lg, jsonl) for lg in loggers):
        loggers.append(jsonl())
    return loggers


def _launch(workspace: Workspace, parsed: Any, device: torch.device, origin: _Origin) -> RunOutcome:
    settings = Trainer()
    # Under torchrun: join the process group; rank 0 alone holds run.lock and writes the run.
    ctx, device = distributed.setup(device, timeout_s=settings.dist_timeout_s)
    ok = False
    try:
        if ctx.is_main:
            with workspace.lock() as lock:
                outcome = _run_locked(workspace, parsed, settings, device, origin, lock_takeover=lock.took_over, ctx=ctx)
        else:
            outcome = _run_locked(workspace, parsed, settings, device, origin, lock_takeover=None, ctx=ctx)
        ok = True
        return outcome
    finally:
        distributed.teardown(ctx, ok=ok)


def _rank_state(state: dict[str, Any], ctx: distributed.DistContext, source: Path) -> dict[str, Any]:
    """This rank's random streams, sampler position and pairing totals from a checkpoint.

    Raises:
        ResumeError: the checkpoint was written by another number of processes (their
            batches and random streams cannot be re-dealt exactly).
    """
    saved = int(state.get("world_size", 1))
    if saved != ctx.world_size:
        raise ResumeError(
            f"{source} was written by {saved} training process(es), this resume has {ctx.world_size}; resume "
            f"with the same number (flowkit resume RUN --nproc {saved}, or torchrun --nproc-per-node/--nnodes "
            "giving that world size) — another world size would deal other batches and random streams"
        )
    if "ranks" in state:
        return state["ranks"][ctx.rank]
    return {"sampler": state["sampler"], "rng": state["rng"], "pairing_totals": state["pairing_totals"]}


def _run_locked(workspace: Workspace, parsed: Any, settings: Trainer, device: torch.device,
                origin: _Origin, *, lock_takeover: dict[str, Any] | None,
                ctx: distributed.DistContext | None = None) -> RunOutcome:
    ctx = ctx or distributed.DistContext()
    from flowkit.data.stats import LatentStats, compute_latent_stats
    from flowkit.data.text import build_vocab_for, vocab_from_state_dict
    from flowkit.model.dit import DUR_FILM_PREFIX, GLOBALS_PREFIX, model_diff
    from flowkit.train.vocab_growth import INIT_RULE, grow_text_embedding

    model_config = settings.model
    aligned = model_config.text_path == "aligned"
    from flowkit.data.text_phonemes import PhonemeFrontEnd

    if aligned and isinstance(settings.text, PhonemeFrontEnd):
        raise ConfigError("Trainer.text = @text.phonemes() with the aligned text path: unit timings index the raw "
                          "text's characters, not phonemes; use text.chars there, or an unaligned model")
    loaded = origin.loaded
    train_set, val_set = _open_data(settings, aligned, _config_names(getattr(parsed, "files", ())))
    try:
        fingerprint = train_set.fingerprint()
        if origin.kind == "resume":
            assert loaded is not None
            compatibility.check_data(loaded.meta.get("data_fingerprint"), fingerprint, run_dir=str(workspace.root))
            train_set.verify_stores()  # the recorded fingerprint holds only if the stores are as prepare wrote them
            compatibility.check_steps(loaded.step, settings.steps, checkpoint=str(loaded.path))
        if loaded is None:
            stats = compute_latent_stats(train_set)
            vocab = build_vocab_for(settings.text, train_set.segments.texts(), train_set.segments.field("language"))
            languages = sorted(v for v in train_set.segments.values("language") if v)
        else:
            stats = LatentStats.from_dict(loaded.meta["latent_stats"])
            vocab = vocab_from_state_dict(loaded.meta["vocab"])
            languages = list(loaded.meta["languages"])
        added_tokens: list[str] = []
        if origin.kind == "init_from":
            assert loaded is not None
            # phoneme vocabularies do not grow (unseen symbols count as unknown)
            added_tokens = vocab.missing(train_set.segments.texts()) if hasattr(vocab, "missing") else []
            if added_tokens:
                vocab = vocab.extended(added_tokens)
        allowed_model_diff: dict[str, Any] = {}
        if origin.kind == "init_from":
            assert loaded is not None
            diff = model_diff(loaded.meta["model_config"], model_config)
            allowed_model_diff = compatibility.check_init_from_model(diff, parent_path=str(loaded.path))

        seed_globals(settings.seed)  # the same initial weights on every rank
        model = model_config.build(train_set.latent_dim, vocab.size, len(languages)).to(device)
        if ctx.enabled:
            # After init the global generators serve only rank-local draws: one stream per rank.
            seed_globals(derive_seed(settings.seed, "globals", ctx.rank))
        ema = EMA(model, decay=settings.ema_decay, warmup=settings.ema_warmup)
        optimizer = build_optimizer(model, lr=settings.lr, betas=settings.betas, weight_decay=settings.weight_decay, device=device)
        lengths = settings.pairing.budget_lengths(train_set.segments)
        stream = BatchStream(settings.batch_sampler, lengths, settings.seed, ctx.rank, ctx.world_size)
        streams = RandomStreams.create(settings.seed, ctx.rank)
        cfg_drop = CFGDrop(**settings.cfg_drop)
        builder = BatchBuilder(train_set, settings.pairing, stats, vocab, languages, model_config.text_path, cfg_drop,
                               row_frames=getattr(settings.batch_sampler, "row_frames", None))
        if device.type == "cuda" and settings.tf32:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        if settings.memory_check:
            from flowkit.console import console
            from flowkit.train.memory import step0_check

            summary = step0_check(model, builder, settings.batch_sampler, lengths, device,
                                  autocast=device.type == "cuda", limit_gb=settings.max_memory_gb)
            if ctx.is_main:
                console.print(f"memory: {summary}", markup=False, highlight=False, soft_wrap=True)
        if settings.compile:
            model.compile_blocks()
        evaluator = None
        if len(val_set) and settings.eval_every is not None:
            val_builder = attrs.evolve(builder, dataset=val_set)
            evaluator = Evaluator(val_builder, settings.batch_sampler, settings, model_config, device, autocast=device.type == "cuda")
        probe = None
        if settings.probe is not None and ctx.is_main:
            probe_set = train_set if settings.probe.split == "train" else val_set
            probe = _probe_runner(settings, probe_set, stats, vocab, languages, device,
                                  attrs.evolve(builder, dataset=probe_set))
        counters = Counters(horizon=settings.steps)
        pairing_totals = PairingCounts()
        init_from_info = None
        if origin.kind == "resume":
            assert loaded is not None
            state = loaded.state
            checkpoint.load_strict(model, state["model"], what="model", source=loaded.path)
            ema.load_state_dict(state["ema"])
            optimizer.load_state_dict(state["optimizer"])
            own = _rank_state(state, ctx, loaded.path)
            stream.load_state_dict(own["sampler"])
            streams.restore(own["rng"])
            counters = Counters(**state["counters"])
            pairing_totals = PairingCounts.from_dict(own["pairing_totals"])
            init_from_info = loaded.meta.get("init_from")
        elif origin.kind == "init_from":
            assert loaded is not None
            new_prefixes = tuple(p for field, p in (("dur_cond", DUR_FILM_PREFIX), ("conditions", GLOBALS_PREFIX))
                                 if field in allowed_model_diff)
            added = frozenset(k for k in model.state_dict() if new_prefixes and k.startswith(new_prefixes))
            parent_model, parent_ema = dict(loaded.state["model"]), dict(loaded.state["ema"])
            if added_tokens:
                parent_model = grow_text_embedding(parent_model, vocab.size)
                parent_ema["shadow"] = grow_text_embedding(parent_ema["shadow"], vocab.size)
            checkpoint.load_strict(model, parent_model, what="model", source=loaded.path, allow_missing=added)
            ema.load_state_dict(parent_ema, allow_missing=added)
            init_from_info = {"checkpoint": str(loaded.path.resolve()), "step": loaded.step,
                              "model_diff": {k: list(v) for k, v in allowed_model_diff.items()}}
            if added_tokens:
                init_from_info["added_tokens"] = {"tokens": added_tokens, "rows": [vocab.size - len(added_tokens), vocab.size],
                                                  "init": INIT_RULE}
                if ctx.is_main:
                    from flowkit.console import console

                    console.print(f"init-from: the data hold {len(added_tokens)} token(s) the parent's vocabulary lacks; "
                                  f"text embedding (model and EMA) grown to {vocab.size} rows, new rows = {INIT_RULE}: "
                                  + " ".join(repr(t) for t in added_tokens), highlight=False, markup=False, soft_wrap=True)

        resumed = origin.kind == "resume"
        step = counters.step
        meta = {
            "config_text": parsed.text,
            "seed": settings.seed,
            "latent_stats": stats.to_dict(),
            "vocab": vocab.state_dict(),
            "languages": languages,
            "model_config": model_config.to_dict(),
            "data_fingerprint": fingerprint,
            "stores": [str(p) for p in train_set.paths],
            "latent_dim": train_set.latent_dim,
            "frame_rate": train_set.frame_rate,
            "sample_rate": train_set.sample_rate,
            # what synthesis needs even when the stores have moved: the encoder record its
            # vocoder checks and reads, and the run's vocoder (None: the default)
            "encoder": train_set.store_attrs.get("encoder"),
            "vocoder": vocoder_record(settings.vocoder),
            "init_from": init_from_info,
            "world_size": ctx.world_size,
        }
        if ctx.is_main:
            _write_workspace(workspace, parsed, settings, train_set, val_set, device, model, meta, origin,
                             lock_takeover=lock_takeover, step=step)
        # Only rank 0 logs; the others keep no logger at all.
        loggers = _loggers(settings) if ctx.is_main else []
        for logger in loggers:
            logger.open(workspace.root, resumed=resumed, total_steps=settings.steps, start_step=step)
        trainer = TrainingLoop(
            settings, model=model, ema=ema, optimizer=optimizer, stream=stream, streams=streams, builder=builder,
            evaluator=evaluator, workspace=workspace, loggers=loggers, device=device, meta=meta,
            counters=counters, pairing_totals=pairing_totals, resumed=resumed, dist=ctx,
            ddp=distributed.wrap_model(ctx, model, device, find_unused_parameters=settings.ddp_find_unused_parameters),
            probe=probe,
        )
        try:
            if resumed:
                trainer.log({"kind": "event", "step": step, "event": "resumed", "checkpoint": str(loaded.path) if loaded else None})
            status = trainer.run()
        finally:
            for logger in loggers:
                logger.close()
            if ctx.is_main:
                # A full disk must not replace the error that says why the run stopped.
                with contextlib.suppress(OSError):
                    workspace.write_report(_report(workspace, settings, trainer))
        return RunOutcome(workspace.root, status, trainer.counters.step, trainer.counters.best_val_loss)
    finally:
        train_set.close()
        val_set.close()


def _probe_runner(settings: Trainer, dataset: Any, stats: Any, vocab: Any, languages: list[str],
                  device: torch.device, builder: Any) -> Any:
    """The run's `ProbeRunner`: the probe's split, the run's schedule, solver and vocoder."""
    from flowkit.synth.vocoders import GriffinLim
    from flowkit.train.probe import ProbeRunner

    probe = settings.probe
    vocoder = probe.vocoder or settings.vocoder or GriffinLim()
    encoder = dict(dataset.store_attrs.get("encoder") or {})
    return ProbeRunner(probe, dataset, stats=stats, vocab=vocab, languages=languages, schedule=settings.schedule,
                       solver=settings.solver, vocoder=vocoder, encoder=encoder, run_seed=settings.seed, device=device,
                       builder=builder)


def _write_workspace(workspace: Workspace, parsed: Any, settings: Trainer, train_set: Any, val_set: Any,
                     device: torch.device, model: torch.nn.Module, meta: dict[str, Any], origin: _Origin, *,
                     lock_takeover: dict[str, Any] | None, step: int) -> None:
    """Rank 0's files of a start or resume (``meta`` is the checkpoints' static meta)."""
    loaded = origin.loaded
    resumed = origin.kind == "resume"
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
            "resumed_from": str(loaded.path) if resumed and loaded else None,
            "skipped_checkpoints": [list(s) for s in origin.skipped],
            "allowed_config_changes": {k: list(v) for k, v in origin.allowed_changes.items()},
            "lock_taken_over": lock_takeover,
            "metrics_lines_removed": removed,
            "num_parameters": sum(p.numel() for p in model.parameters()),
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


def _report(workspace: Workspace, settings: Trainer, trainer: TrainingLoop) -> str:
    c = trainer.counters
    saved = [p.name for _, p in checkpoint.list_checkpoints(workspace.checkpoints)]
    if c.step >= settings.steps:
        state = "completed"
    elif saved:
        state = f"stopped at step {c.step} (continue: flowkit resume {workspace.root})"
    else:
        state = (f"stopped at step {c.step} before its first checkpoint (Trainer.save_every = {settings.save_every}): "
                 "nothing to continue from; re-run the same `flowkit train` command to start it again")
    best = "-" if c.best_val_loss is None else f"{c.best_val_loss:.5f}"
    best_dirs = [p.name for _, p in checkpoint.list_checkpoints(workspace.best)]
    lines = [
        f"# Run {workspace.root.name}",
        "",
        f"- state: {state}",
        f"- steps: {c.step} / {settings.steps} ({c.updates} optimizer updates, {c.skipped} skipped)",
        f"- best EMA validation loss: {best} ({', '.join(best_dirs) or 'none kept'})",
        f"- checkpoints: {', '.join(saved) or 'none'}",
        f"- seed: {settings.seed}",
        f"- data fingerprint: {trainer.meta['data_fingerprint']}",
        "- metrics: metrics.jsonl; config: config.gin",
        "",
    ]
    return "\n".join(lines)
