"""Start, continue and fine-tune training runs: everything between the CLI and `TrainingLoop.run`.

The story of a start, as torchtitan's ``main()`` tells it: parse the config, choose where
the run comes from (its *origin*), build the parts, restore the origin's state into them,
train::

    origin = plan_start(workspace, parsed, init_from)   # Fresh | Resume | InitFrom
    parts = build_parts(settings, origin, device, ctx, _config_names(getattr(parsed, "files", ())))   # data, model, EMA, optimizer, streams
    state = origin.restore(parts, settings, ctx)         # weights, counters, positions
    TrainingLoop(settings, parts, ...).run()

- `train` starts a run in ``--out``, or continues it when ``--out`` already holds a run
  of the same config (a requeued cluster job re-runs the same command): from its newest
  valid checkpoint, or from step 0 when none was written. ``init_from`` makes the new
  run start from another run's weights, EMA and latent stats.
- `resume` continues a run from its own ``config.gin``, bit-identically; with no valid
  checkpoint it starts the run again from step 0 (nothing can be lost).

Each holds ``run.lock`` for the whole run and writes the workspace files
(`flowkit.train.workspace`).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
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
from flowkit.batching.host_memory import keep_freed_memory
from flowkit.batching.pairing import PairingCounts
from flowkit.batching.samplers import BatchStream
from flowkit.checkpoints import files as checkpoint
from flowkit.checkpoints.synthesis_meta import SYNTHESIS_KEY, synthesis_meta
from flowkit.console import console, err_console
from flowkit.data.encoder_records import vocoder_record
from flowkit.errors import CheckpointError, ConfigError, DataError, FlowkitError, ResumeError
from flowkit.loggers.jsonl import truncate_after_step
from flowkit.train import compatibility, distributed
from flowkit.train.ema import EMA
from flowkit.train.evaluation import Evaluator
from flowkit.train.loop import Counters, TrainingLoop
from flowkit.train.optimization import build_optimizer
from flowkit.train.randomness import RandomStreams, derive_seed, seed_globals
from flowkit.train.settings import Trainer
from flowkit.train.workspace import Workspace, git_commit

__all__ = ["Fresh", "InitFrom", "Resume", "RunOutcome", "RunParts", "build_parts", "check_data", "default_run_dir",
           "option_bindings", "plan_start", "restore_config_file", "resume", "tiny_lr_warning", "train"]


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


def _say(line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def _warn(line: str) -> None:
    err_console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)


# ---- the parts of a run ------------------------------------------------------------------


@attrs.define
class RunParts:
    """Everything a run trains with, built from its settings (`build_parts`); the state an
    origin restores goes into ``model``, ``ema``, ``optimizer``, ``stream`` and ``streams``."""

    train_set: Any
    val_set: Any
    fingerprint: str
    stats: Any
    vocab: Any
    languages: list[str]
    model: torch.nn.Module
    ema: EMA
    optimizer: torch.optim.Optimizer
    stream: BatchStream
    streams: RandomStreams
    builder: BatchBuilder
    evaluator: Evaluator | None
    probe: Any  # a flowkit.train.probe.ProbeRunner on rank 0 when Trainer.probe is set, else None

    def close(self) -> None:
        self.train_set.close()
        self.val_set.close()


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
        why = train_set.why_empty()
        by_reason = train_set.report.counts()
        train_set.close()
        if aligned and set(by_reason) == {"missing_units"}:
            raise DataError(
                f"{configs} uses model.dit.text_path = 'aligned', which needs unit timings; none of the "
                f"{by_reason['missing_units']} segments of {', '.join(map(str, stores))} has them: prepare with "
                "--align energy or --textgrids DIR"
            )
        raise DataError(f"no usable training segment: {why}")
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


def check_data(settings: Trainer, configs: str = "the config") -> str:
    """Open the run's stores as a start does (the union's checks, the training split's
    emptiness, the vocoder against the encoder) and close them; for ``flowkit config --data``.

    Returns:
        One line: segments per split and the stores.

    Raises:
        DataError, ConfigError: what a start with these settings would raise for its data.
    """
    train_set, val_set = _open_data(settings, getattr(settings.model, "text_path", None) == "aligned", configs)
    try:
        return (f"{len(train_set)} train / {len(val_set)} val segments "
                f"({train_set.report.counts() or 'none'} rejected) from {', '.join(map(str, train_set.paths))}")
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


def build_parts(settings: Trainer, origin: Origin, device: torch.device, ctx: distributed.DistContext,
                configs: str = "the config") -> RunParts:
    """Open the data and build model, EMA, optimizer, batch stream, random streams and
    evaluator, as a fresh run of ``settings`` has them (`Origin.restore` then loads state).

    Latent stats, vocabulary and languages come from ``origin`` (a checkpoint's, or the
    training split's); the model's initial weights from the seed, the same on every rank.

    Raises:
        DataError: no usable training segment (or a store that cannot be read).
        ResumeError: the origin refuses the data (another fingerprint).
    """
    from flowkit.data.text_phonemes import PhonemeFrontEnd

    model_config = settings.model
    if model_config.text_path == "aligned" and isinstance(settings.text, PhonemeFrontEnd):
        raise ConfigError("Trainer.text = @text.phonemes() with the aligned text path: unit timings index the raw "
                          "text's characters, not phonemes; use text.chars there, or an unaligned model")
    train_set, val_set = _open_data(settings, model_config.text_path == "aligned", configs)
    try:
        fingerprint = train_set.fingerprint()
        origin.check(settings, train_set, fingerprint)
        stats, vocab, languages = origin.data_state(settings, train_set)
        seed_globals(settings.seed)  # the same initial weights on every rank
        model = model_config.build(train_set.latent_dim, vocab.size, len(languages)).to(device)
        if ctx.enabled:
            # After init the global generators serve only rank-local draws: one stream per rank.
            seed_globals(derive_seed(settings.seed, "globals", ctx.rank))
        ema = EMA(model, decay=settings.ema_decay, warmup=settings.ema_warmup)
        optimizer = build_optimizer(model, lr=settings.lr, betas=settings.betas, weight_decay=settings.weight_decay,
                                    device=device)
        lengths = settings.pairing.budget_lengths(train_set.segments)
        stream = BatchStream(settings.batch_sampler, lengths, settings.seed, ctx.rank, ctx.world_size)
        builder = BatchBuilder(train_set, settings.pairing, stats, vocab, languages, model_config.text_path,
                               CFGDrop(**settings.cfg_drop), row_frames=getattr(settings.batch_sampler, "row_frames", None))
        if device.type == "cuda" and settings.tf32:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        if settings.memory_check:
            from flowkit.train.memory import step0_check

            summary = step0_check(model, builder, settings.batch_sampler, lengths, device,
                                  autocast=device.type == "cuda", limit_gb=settings.max_memory_gb)
            if ctx.is_main:
                _say(f"memory: {summary}")
        if settings.compile:
            model.compile_blocks()
        evaluator = None
        if len(val_set) and settings.eval_every is not None:
            evaluator = Evaluator(attrs.evolve(builder, dataset=val_set), settings.batch_sampler, settings,
                                  model_config, device, autocast=device.type == "cuda")
        probe = None
        if settings.probe is not None and ctx.is_main:
            probe_set = train_set if settings.probe.split == "train" else val_set
            probe = _probe_runner(settings, probe_set, stats, vocab, languages, device,
                                  attrs.evolve(builder, dataset=probe_set))
        return RunParts(train_set, val_set, fingerprint, stats, vocab, languages, model, ema, optimizer, stream,
                        RandomStreams.create(settings.seed, ctx.rank), builder, evaluator, probe)
    except BaseException:
        train_set.close()
        val_set.close()
        raise


# ---- where a run comes from --------------------------------------------------------------


@attrs.frozen
class Restored:
    """What an origin put back besides the weights: the counters, this rank's pairing
    totals, and the init-from record that travels with every checkpoint of the run."""

    counters: Counters
    pairing_totals: PairingCounts
    init_from: dict[str, Any] | None


@attrs.frozen
class Fresh:
    """A new run: weights from the seed, statistics and vocabulary from the training split."""

    resumed = False

    def check(self, settings: Trainer, train_set: Any, fingerprint: str) -> None:
        pass

    def data_state(self, settings: Trainer, train_set: Any) -> tuple[Any, Any, list[str]]:
        from flowkit.data.stats import compute_latent_stats
        from flowkit.data.text import build_vocab_for

        vocab = build_vocab_for(settings.text, train_set.segments.texts(), train_set.segments.field("language"))
        languages = sorted(v for v in train_set.segments.values("language") if v)
        return compute_latent_stats(train_set), vocab, languages

    def restore(self, parts: RunParts, settings: Trainer, ctx: distributed.DistContext) -> Restored:
        return Restored(Counters(horizon=settings.steps), PairingCounts(), None)


def _checkpoint_data_state(loaded: checkpoint.LoadedCheckpoint) -> tuple[Any, Any, list[str]]:
    from flowkit.data.stats import LatentStats
    from flowkit.data.text import vocab_from_state_dict

    meta = loaded.meta
    return LatentStats.from_dict(meta["latent_stats"]), vocab_from_state_dict(meta["vocab"]), list(meta["languages"])


@attrs.frozen
class Resume:
    """Continue a run from one of its checkpoints, bit-identically; ``skipped`` are newer
    checkpoints found damaged, ``allowed_changes`` the allow-listed config changes."""

    loaded: checkpoint.LoadedCheckpoint
    skipped: tuple[tuple[str, str], ...] = ()
    allowed_changes: dict[str, Any] = attrs.Factory(dict)
    resumed = True

    def check(self, settings: Trainer, train_set: Any, fingerprint: str) -> None:
        compatibility.check_data(self.loaded.meta.get("data_fingerprint"), fingerprint,
                                 run_dir=str(self.loaded.path.parent.parent))
        train_set.verify_stores()  # the recorded fingerprint holds only if the stores are as prepare wrote them
        compatibility.check_steps(self.loaded.step, settings.steps, checkpoint=str(self.loaded.path))

    def data_state(self, settings: Trainer, train_set: Any) -> tuple[Any, Any, list[str]]:
        return _checkpoint_data_state(self.loaded)

    def restore(self, parts: RunParts, settings: Trainer, ctx: distributed.DistContext) -> Restored:
        state, source = self.loaded.state, self.loaded.path
        checkpoint.load_strict(parts.model, state["model"], what="model", source=source)
        parts.ema.load_state_dict(state["ema"])
        parts.optimizer.load_state_dict(state["optimizer"])
        own = _rank_state(state, ctx, source)
        parts.stream.load_state_dict(own["sampler"])
        parts.streams.restore(own["rng"])
        return Restored(Counters(**state["counters"]), PairingCounts.from_dict(own["pairing_totals"]),
                        self.loaded.meta.get("init_from"))


@attrs.frozen
class InitFrom:
    """A new run from a parent checkpoint's weights, EMA, latent stats and vocabulary;
    optimizer, lr schedule, sampler and random streams start fresh. The model configs must
    match except dur_cond "none" -> "emotion", whose new parameters keep their zero init."""

    loaded: checkpoint.LoadedCheckpoint
    resumed = False

    def model_diff(self, settings: Trainer) -> dict[str, Any]:
        from flowkit.model.dit import model_diff

        diff = model_diff(self.loaded.meta["model_config"], settings.model)
        return compatibility.check_init_from_model(diff, parent_path=str(self.loaded.path))

    def check(self, settings: Trainer, train_set: Any, fingerprint: str) -> None:
        compatibility.check_init_from_data(self.loaded.meta, train_set.store_attrs.get("encoder"),
                                           train_set.latent_dim, parent_path=str(self.loaded.path),
                                           stores=", ".join(map(str, train_set.paths)))
        self.model_diff(settings)

    def data_state(self, settings: Trainer, train_set: Any) -> tuple[Any, Any, list[str]]:
        """The parent's stats, languages and vocabulary, grown by the tokens of the data it lacks."""
        stats, vocab, languages = _checkpoint_data_state(self.loaded)
        # phoneme vocabularies do not grow (unseen symbols count as unknown)
        added = vocab.missing(train_set.segments.texts()) if hasattr(vocab, "missing") else []
        return stats, (vocab.extended(added) if added else vocab), languages

    def restore(self, parts: RunParts, settings: Trainer, ctx: distributed.DistContext) -> Restored:
        from flowkit.model.dit import DUR_FILM_PREFIX, GLOBALS_PREFIX
        from flowkit.train.vocab_growth import INIT_RULE, grow_text_embedding

        diff = self.model_diff(settings)
        new_prefixes = tuple(p for field, p in (("dur_cond", DUR_FILM_PREFIX), ("conditions", GLOBALS_PREFIX))
                             if field in diff)
        added = frozenset(k for k in parts.model.state_dict() if new_prefixes and k.startswith(new_prefixes))
        parent_model, parent_ema = dict(self.loaded.state["model"]), dict(self.loaded.state["ema"])
        vocab = parts.vocab  # grown by `data_state` from the parent's by these tokens:
        parent_vocab = _checkpoint_data_state(self.loaded)[1]
        added_tokens = parent_vocab.missing(parts.train_set.segments.texts()) if hasattr(parent_vocab, "missing") else []
        if added_tokens:
            parent_model = grow_text_embedding(parent_model, vocab.size)
            parent_ema["shadow"] = grow_text_embedding(parent_ema["shadow"], vocab.size)
        checkpoint.load_strict(parts.model, parent_model, what="model", source=self.loaded.path, allow_missing=added)
        parts.ema.load_state_dict(parent_ema, allow_missing=added)
        info: dict[str, Any] = {"checkpoint": str(self.loaded.path.resolve()), "step": self.loaded.step,
                                "model_diff": {k: list(v) for k, v in diff.items()}}
        if added_tokens:
            info["added_tokens"] = {"tokens": added_tokens, "rows": [vocab.size - len(added_tokens), vocab.size],
                                    "init": INIT_RULE}
            if ctx.is_main:
                _say(f"init-from: the data hold {len(added_tokens)} token(s) the parent's vocabulary lacks; "
                     f"text embedding (model and EMA) grown to {vocab.size} rows, new rows = {INIT_RULE}: "
                     + " ".join(repr(t) for t in added_tokens))
        return Restored(Counters(horizon=settings.steps), PairingCounts(), info)


Origin = Fresh | Resume | InitFrom


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


def _not_a_parent(parent: Path) -> str | None:
    """Why ``parent`` cannot be an init-from parent before anything is read (a latent store,
    a folder of shard stores, a directory with neither checkpoints nor a checkpoint), or None."""
    from flowkit.data.shards import is_shard_folder

    if (parent / "zarr.json").is_file() or is_shard_folder(parent):
        return (f"{parent} is a latent store (made by flowkit prepare), not a checkpoint or run; give the "
                "store with --data, and as the parent a run directory (RUN), RUN/checkpoints/step-N or the "
                "run flowkit import-f5 wrote")
    if parent.is_dir() and not (parent / "checkpoints").is_dir() and not (parent / checkpoint.META_FILE).is_file() \
            and not (parent / checkpoint.COMPLETE_FILE).is_file():
        return (f"{parent} is neither a run directory (no checkpoints/) nor a checkpoint (no meta.json); give RUN, "
                "RUN/checkpoints/step-N or the run flowkit import-f5 wrote")
    return None


def _parent_path(parent: Path) -> Path:
    """The checkpoint directory ``parent`` stands for (a run directory: its newest valid checkpoint).

    Raises:
        CheckpointError: not a run or checkpoint (see `_not_a_parent`), or a run with no valid checkpoint.
    """
    parent = Path(parent)
    why = _not_a_parent(parent)
    if why is not None:
        raise CheckpointError(why)
    if (parent / "checkpoints").is_dir():
        found, _ = checkpoint.find_latest(parent / "checkpoints")
        if found is None:
            raise CheckpointError(f"{parent} has no valid checkpoint to start from")
        return found
    return parent


def _parent_checkpoint(parent: Path) -> checkpoint.LoadedCheckpoint:
    """``parent`` (a checkpoint, or a run directory: its newest valid checkpoint), loaded;
    one line says where the new run starts from."""
    loaded = checkpoint.load_checkpoint(_parent_path(parent))
    imported = loaded.meta.get("imported_from")
    origin = f", imported from {imported.get('file', imported) if isinstance(imported, dict) else imported}" \
        if imported else ""
    _say(f"init-from: starting from {loaded.path} (step {loaded.step}{origin}): its weights, EMA, latent stats "
         "and vocabulary; optimizer, lr schedule, sampler and random streams start fresh")
    return loaded


def _newest_valid(workspace: Workspace) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The checkpoint to continue from: the newest valid one in ``checkpoints/``, else the
    one in ``best/`` (with a warning: the steps after it are trained again)."""
    path, skipped = checkpoint.find_latest(workspace.checkpoints)
    if path is None:
        best, best_skipped = checkpoint.find_latest(workspace.best)
        if best is not None and skipped:
            _warn(f"every checkpoint in {workspace.checkpoints} is damaged; continuing from {best}")
        path, skipped = best, skipped + best_skipped
    for bad, reason in skipped:
        # Loud, because the steps since ``path`` will be trained again.
        if path is not None:
            _warn(f"skipping checkpoint {bad}: {reason}; resuming from {path.name}")
    return path, skipped


def plan_start(workspace: Workspace, parsed: Any, init_from: Path | None = None, *, command: str = "train") -> Origin:
    """Where the run in ``workspace`` starts from, for the config just parsed.

    A directory with no run in it starts fresh (or from ``init_from``). A directory that
    holds a run continues it when its ``config.gin`` equals ``parsed`` (modulo the resume
    allow-list): from its newest valid checkpoint, or from step 0 when it has none — so
    a job re-run after a kill -9 continues. One line says which.

    Raises:
        ResumeError: the directory holds checkpoints but no config.gin, or a run of
            another config (naming the first differing binding).
    """
    root = workspace.root
    saved_config = workspace.config.read_text(encoding="utf-8") if workspace.config.is_file() else None
    has_checkpoints = bool(checkpoint.list_checkpoints(workspace.checkpoints) or checkpoint.list_checkpoints(workspace.best))
    if saved_config is None:
        if has_checkpoints:
            raise ResumeError(f"{root} holds checkpoints but no config.gin (deleted?); continue it with "
                              f"`flowkit resume {root} --restore-config` (every checkpoint holds the config), "
                              "or choose another --out")
        return InitFrom(_parent_checkpoint(Path(init_from))) if init_from is not None else Fresh()
    allowed = compatibility.check_resume_config(saved_config, parsed.text, run_dir=str(root))
    path, skipped = _newest_valid(workspace)
    if path is not None:
        loaded = checkpoint.load_checkpoint(path)
        # the checkpoint's own config is the reference (config.gin may carry allowed changes)
        allowed = compatibility.check_resume_config(loaded.meta["config_text"], parsed.text, run_dir=str(root))
        _say(f"{command}: continuing {root} from {path.parent.name}/{path.name} (step {loaded.step})")
        return Resume(loaded, tuple((str(p), r) for p, r in skipped), allowed)
    if skipped:
        # Committed checkpoints exist but none reads back (saves are atomic, so a kill never
        # does this): starting over would prune them, and they may hold weeks of training.
        reasons = "; ".join(f"{p.parent.name}/{p.name}: {r}" for p, r in skipped)
        raise ResumeError(f"{root} has no valid checkpoint ({reasons}); nothing was changed — restore a "
                          f"checkpoint, or move {workspace.checkpoints} and {workspace.best} aside to start from step 0")
    parent = init_from if init_from is not None else _first_init_from(workspace)
    _say(f"{command}: {root} has no valid checkpoint (none was written); starting it from step 0")
    return InitFrom(_parent_checkpoint(Path(parent))) if parent is not None else Fresh()


def _first_init_from(workspace: Workspace) -> str | None:
    """The parent checkpoint a run directory's first start was initialised from, if any."""
    try:
        info = json.loads((workspace.root / "run_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = info.get("init_from") if isinstance(info, dict) else None
    return record.get("checkpoint") if isinstance(record, dict) else None


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
        raise DataError(f"--data {missing[0]}: no such store (the path does not exist); give a store made by flowkit prepare (NAME.zarr)")
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
        raise CheckpointError(f"{init_from} is not a checkpoint directory (it does not exist); give RUN or RUN/checkpoints/step-N")
    extra = [*bindings, *option_bindings(data, steps)]
    parsed = gin_config.parse(config_files, extra)
    network, line = _parent_network(Path(init_from)) if init_from is not None else ([], None)
    if network:
        parsed = gin_config.parse(config_files, [*extra, *network])
    origin = plan_start(workspace, parsed, init_from)
    if line is not None and isinstance(origin, InitFrom):
        _say(line)
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
        meta = json.loads((_parent_path(parent) / checkpoint.META_FILE).read_text(encoding="utf-8"))
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
    _say(f"resume: restored {workspace.config} from {found.parent.name}/{found.name}/{checkpoint.META_FILE}")
    return found


# ---- one run, start to end -----------------------------------------------------------------


def _loggers(settings: Trainer) -> list[Any]:
    jsonl = registry.get("logger", "jsonl").obj
    loggers = list(settings.loggers)
    if not any(isinstance(lg, jsonl) for lg in loggers):
        loggers.append(jsonl())
    return loggers


def _launch(workspace: Workspace, parsed: Any, device: torch.device, origin: Origin) -> RunOutcome:
    keep_freed_memory()  # before any other thread allocates (see flowkit.batching.host_memory)
    settings = Trainer()
    if isinstance(origin, Resume) and origin.loaded.step == settings.steps:
        # nothing to train: touch nothing (no resume record, no rewritten report), so a
        # restart loop can run the same command until the run is done
        _say(f"{workspace.root} is already complete ({settings.steps}/{settings.steps} steps); train longer "
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
    parts = build_parts(settings, origin, device, ctx, _config_names(getattr(parsed, "files", ())))
    loggers: list[Any] = []
    try:
        restored = origin.restore(parts, settings, ctx)
        step = restored.counters.step
        meta = _checkpoint_meta(parsed, settings, parts, restored, ctx)
        if ctx.is_main:
            _write_workspace(workspace, parsed, settings, parts, device, meta, origin,
                             lock_takeover=lock_takeover, step=step)
        if ctx.is_main and not origin.resumed:
            maybe_warn_tiny_lr(settings)
        loggers = _loggers(settings) if ctx.is_main else []  # only rank 0 logs
        for logger in loggers:
            logger.open(workspace.root, resumed=origin.resumed, total_steps=settings.steps, start_step=step)
        loop = TrainingLoop(
            settings, parts, workspace=workspace, loggers=loggers, device=device, meta=meta,
            counters=restored.counters, pairing_totals=restored.pairing_totals, resumed=origin.resumed, dist=ctx,
            ddp=distributed.wrap_model(ctx, parts.model, device, find_unused_parameters=settings.ddp_find_unused_parameters),
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
                    workspace.write_report(_report(workspace, settings, loop))
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
        _warn(line)


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


def _checkpoint_meta(parsed: Any, settings: Trainer, parts: RunParts, restored: Restored,
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


def _write_workspace(workspace: Workspace, parsed: Any, settings: Trainer, parts: RunParts, device: torch.device,
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


def _report(workspace: Workspace, settings: Trainer, loop: TrainingLoop) -> str:
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
