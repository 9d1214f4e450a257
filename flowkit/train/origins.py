"""Where a run comes from: a fresh start, a resume of its own newest valid checkpoint, or an
init-from another run's weights (`plan_start` chooses; re-running the same `flowkit train`
command continues its run). Each origin checks the data against itself, gives the latent
stats, vocabulary and languages, and restores its state into the built `RunParts`.

A run that trains adapters (``Trainer.adapter``) starts from a base by init-from (a run, a
checkpoint, an imported F5-TTS checkpoint): the base's EMA weights become the frozen
weights, the adapter (`flowkit.adapters.lora`) is inserted, and the run's EMA and optimizer
are built over the adapter's weights alone, so its checkpoints hold the adapter (and the
grown embedding rows) with a record of the base (`flowkit.adapters.files`). A resume loads
that base again, checks it is the same file, inserts the adapter and restores the adapter's
weights, EMA, optimizer and streams as any resume does (`restore_origin`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from flowkit.batching.pairing import PairingCounts
from flowkit.checkpoints import files as checkpoint
from flowkit.console import say, warn
from flowkit.errors import CheckpointError, ConfigError, ResumeError
from flowkit.train import compatibility, distributed
from flowkit.train.ema import EMA
from flowkit.train.loop import Counters
from flowkit.train.optimization import build_optimizer
from flowkit.train.parts import RunParts
from flowkit.train.randomness import derive_seed
from flowkit.train.settings import Trainer
from flowkit.train.workspace import Workspace


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
        from flowkit.text.vocabs import build_vocab_for

        vocab = build_vocab_for(settings.text, train_set.segments.texts(), train_set.segments.field("language"))
        languages = sorted(v for v in train_set.segments.values("language") if v)
        return compute_latent_stats(train_set), vocab, languages

    def restore(self, parts: RunParts, settings: Trainer, ctx: distributed.DistContext) -> Restored:
        return Restored(Counters(horizon=settings.steps), PairingCounts(), None)


def _checkpoint_data_state(loaded: checkpoint.LoadedCheckpoint) -> tuple[Any, Any, list[str]]:
    from flowkit.data.stats import LatentStats
    from flowkit.text.vocabs import vocab_from_state_dict

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
        """The parent's stats, languages and vocabulary, grown by the tokens and languages of
        the data it lacks (new languages appended in sorted order: old ids stay)."""
        from flowkit.text.vocabs import grown_vocab

        stats, vocab, languages = _checkpoint_data_state(self.loaded)
        vocab, _ = grown_vocab(vocab, train_set.segments.texts(), train_set.segments.field("language"))
        new_languages = sorted({v for v in train_set.segments.values("language") if v} - set(languages))
        return stats, vocab, [*languages, *new_languages]

    def restore(self, parts: RunParts, settings: Trainer, ctx: distributed.DistContext) -> Restored:
        from flowkit.model.dit import DUR_FILM_PREFIX, GLOBALS_PREFIX
        from flowkit.text.vocabs import missing_tokens
        from flowkit.train.vocab_growth import (
            INIT_RULE,
            LANGUAGE_INIT_RULE,
            grow_language_embeddings,
            grow_text_embedding,
        )

        diff = self.model_diff(settings)
        new_prefixes = tuple(p for field, p in (("dur_cond", DUR_FILM_PREFIX), ("conditions", GLOBALS_PREFIX))
                             if field in diff)
        added = frozenset(k for k in parts.model.state_dict() if new_prefixes and k.startswith(new_prefixes))
        parent_model, parent_ema = dict(self.loaded.state["model"]), dict(self.loaded.state["ema"])
        vocab = parts.vocab  # grown by `data_state` from the parent's by these tokens:
        parent_vocab = _checkpoint_data_state(self.loaded)[1]
        added_tokens = missing_tokens(parent_vocab, parts.train_set.segments.texts(),
                                      parts.train_set.segments.field("language"))
        if added_tokens:
            parent_model = grow_text_embedding(parent_model, vocab.size)
            parent_ema["shadow"] = grow_text_embedding(parent_ema["shadow"], vocab.size)
        parent_languages = list(self.loaded.meta["languages"])
        added_languages = list(parts.languages[len(parent_languages):])
        if added_languages:
            parent_model = grow_language_embeddings(parent_model, len(parts.languages))
            parent_ema["shadow"] = grow_language_embeddings(parent_ema["shadow"], len(parts.languages))
        checkpoint.load_strict(parts.model, parent_model, what="model", source=self.loaded.path, allow_missing=added)
        parts.ema.load_state_dict(parent_ema, allow_missing=added)
        info: dict[str, Any] = {"checkpoint": str(self.loaded.path.resolve()), "step": self.loaded.step,
                                "model_diff": {k: list(v) for k, v in diff.items()}}
        if added_tokens:
            info["added_tokens"] = {"tokens": added_tokens, "rows": [vocab.size - len(added_tokens), vocab.size],
                                    "init": INIT_RULE}
            if ctx.is_main:
                say(f"init-from: the data hold {len(added_tokens)} token(s) the parent's vocabulary lacks; "
                     f"text embedding (model and EMA) grown to {vocab.size} rows, new rows = {INIT_RULE}: "
                     + " ".join(repr(t) for t in added_tokens))
        if added_languages:
            info["added_languages"] = {"languages": added_languages, "init": LANGUAGE_INIT_RULE}
            if ctx.is_main:
                say(f"init-from: the data hold language(s) the parent lacks ({', '.join(added_languages)}); language "
                    f"embeddings (model and EMA) grown to {len(parts.languages)} languages, "
                    f"new rows = {LANGUAGE_INIT_RULE}")
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


def parent_path(parent: Path) -> Path:
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
    loaded = checkpoint.load_checkpoint(parent_path(parent))
    imported = loaded.meta.get("imported_from")
    origin = f", imported from {imported.get('file', imported) if isinstance(imported, dict) else imported}" \
        if imported else ""
    say(f"init-from: starting from {loaded.path} (step {loaded.step}{origin}): its weights, EMA, latent stats "
         "and vocabulary; optimizer, lr schedule, sampler and random streams start fresh")
    return loaded


def _newest_valid(workspace: Workspace, before: Path | None = None) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The checkpoint to continue from: the newest valid one in ``checkpoints/``, else the
    one in ``best/`` (with a warning: the steps after it are trained again). ``before``: only
    checkpoints older than that one (the next candidate after it failed to load)."""
    path, skipped = checkpoint.find_latest(workspace.checkpoints, before=before)
    if path is None:
        best, best_skipped = checkpoint.find_latest(workspace.best, before=before)
        if best is not None and skipped:
            warn(f"every checkpoint in {workspace.checkpoints} is damaged; continuing from {best}")
        path, skipped = best, skipped + best_skipped
    for bad, reason in skipped:
        # Loud, because the steps since ``path`` will be trained again.
        if path is not None:
            warn(f"skipping checkpoint {bad}: {reason}; resuming from {path.name}")
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
    workspace.check_layout()
    saved_config = workspace.config.read_text(encoding="utf-8") if workspace.config.is_file() else None
    has_checkpoints = bool(checkpoint.list_checkpoints(workspace.checkpoints)
                           or checkpoint.list_checkpoints(workspace.best))
    if saved_config is None:
        if has_checkpoints:
            raise ResumeError(f"{root} holds checkpoints but no config.gin (deleted?); continue it with "
                              f"`flowkit resume {root} --restore-config` (every checkpoint holds the config), "
                              "or choose another --out")
        return InitFrom(_parent_checkpoint(Path(init_from))) if init_from is not None else Fresh()
    allowed = compatibility.check_resume_config(saved_config, parsed.text, run_dir=str(root))
    path, skipped = _newest_valid(workspace)
    loaded = None
    while path is not None:
        try:
            loaded = checkpoint.load_checkpoint(path)
            break
        except CheckpointError as exc:  # verified, yet unreadable (e.g. a pickled object): the next older one
            reason = str(exc).removeprefix(f"{path}: ")
            older, more = _newest_valid(workspace, before=path)
            if older is not None:
                warn(f"skipping checkpoint {path}: {reason}; resuming from {older.name}")
            skipped += [(path, reason), *more]
            path = older
    if path is not None and loaded is not None:
        # the checkpoint's own config is the reference (config.gin may carry allowed changes)
        allowed = compatibility.check_resume_config(loaded.meta["config_text"], parsed.text, run_dir=str(root))
        say(f"{command}: continuing {root} from {path.parent.name}/{path.name} (step {loaded.step})")
        return Resume(loaded, tuple((str(p), r) for p, r in skipped), allowed)
    if skipped:
        # Committed checkpoints exist but none reads back (saves are atomic, so a kill never
        # does this): starting over would prune them, and they may hold weeks of training.
        reasons = "; ".join(f"{p.parent.name}/{p.name}: {r}" for p, r in skipped)
        raise ResumeError(f"{root} has no valid checkpoint ({reasons}); nothing was changed — restore a "
                          f"checkpoint, or move {workspace.checkpoints} and {workspace.best} aside "
                          "to start from step 0")
    parent = init_from if init_from is not None else _first_init_from(workspace)
    say(f"{command}: {root} has no valid checkpoint (none was written); starting it from step 0")
    return InitFrom(_parent_checkpoint(Path(parent))) if parent is not None else Fresh()


def _first_init_from(workspace: Workspace) -> str | None:
    """The parent checkpoint a run directory's first start was initialised from, if any."""
    try:
        info = json.loads((workspace.root / "run_info.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = info.get("init_from") if isinstance(info, dict) else None
    return record.get("checkpoint") if isinstance(record, dict) else None


# ---- adapters: Trainer.adapter inserted as each origin restores ----


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
