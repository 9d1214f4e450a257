"""The parts of a run: data, model, EMA, optimizer, batch stream, random streams, evaluator
and probe, built from a run's settings as a fresh run has them (`build_parts`).

Where the run comes from (`flowkit.train.origins`) then restores its state into them; the
part of an origin that the build reads is the `DataOrigin` protocol below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import attrs
import torch

from flowkit.batching.builder import BatchBuilder
from flowkit.batching.collate import CFGDrop
from flowkit.batching.samplers import BatchStream
from flowkit.console import say
from flowkit.converters.checkpointing import apply_activation_checkpointing
from flowkit.errors import DataError
from flowkit.train import distributed
from flowkit.train.ema import EMA
from flowkit.train.evaluation import Evaluator
from flowkit.train.optimization import build_optimizer
from flowkit.train.randomness import RandomStreams, derive_seed, seed_globals
from flowkit.train.settings import Trainer


class DataOrigin(Protocol):
    """What `build_parts` asks of a run's origin (`flowkit.train.origins`): whether the data
    fit it, and the latent stats, vocabulary and languages the run trains with."""

    def check(self, settings: Trainer, train_set: Any, fingerprint: str) -> None: ...

    def data_state(self, settings: Trainer, train_set: Any) -> tuple[Any, Any, list[str]]: ...


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


def config_names(files: Any) -> str:
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
                f"{by_reason['missing_units']} segments of {', '.join(map(str, stores))} has them: "
                "learn them with `flowkit align train gin/align.gin "
                "--data STORE --out ALIGN_RUN` then `flowkit align write STORE --run ALIGN_RUN`, or prepare with "
                "--textgrids DIR (a forced alignment) or --align energy (a rough estimate)"
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


def build_parts(settings: Trainer, origin: DataOrigin, device: torch.device, ctx: distributed.DistContext,
                configs: str = "the config") -> RunParts:
    """Open the data and build model, EMA, optimizer, batch stream, random streams and
    evaluator, as a fresh run of ``settings`` has them (`Origin.restore` then loads state).

    Latent stats, vocabulary and languages come from ``origin`` (a checkpoint's, or the
    training split's); the model's initial weights from the seed, the same on every rank.

    Raises:
        DataError: no usable training segment (or a store that cannot be read).
        ResumeError: the origin refuses the data (another fingerprint).
    """
    model_config = settings.model
    train_set, val_set = _open_data(settings, model_config.text_path == "aligned", configs)
    try:
        fingerprint = train_set.fingerprint()
        origin.check(settings, train_set, fingerprint)
        stats, vocab, languages = origin.data_state(settings, train_set)
        seed_globals(settings.seed)  # the same initial weights on every rank
        model = model_config.build(train_set.latent_dim, vocab.size, len(languages)).to(device)
        if settings.activation_checkpointing:
            apply_activation_checkpointing(model)
        if ctx.enabled:
            # After init the global generators serve only rank-local draws: one stream per rank.
            seed_globals(derive_seed(settings.seed, "globals", ctx.rank))
        ema = EMA(model, decay=settings.ema_decay, warmup=settings.ema_warmup)
        optimizer = build_optimizer(model, lr=settings.lr, betas=settings.betas, weight_decay=settings.weight_decay,
                                    device=device)
        lengths = settings.pairing.budget_lengths(train_set.segments)
        stream = BatchStream(settings.batch_sampler, lengths, settings.seed, ctx.rank, ctx.world_size)
        builder = BatchBuilder(train_set, settings.pairing, stats, vocab, languages, model_config.text_path,
                               CFGDrop(**settings.cfg_drop),
                               row_frames=getattr(settings.batch_sampler, "row_frames", None))
        if device.type == "cuda" and settings.tf32:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        if settings.memory_check:
            from flowkit.train.memory import step0_check

            summary = step0_check(model, builder, settings.batch_sampler, lengths, device,
                                  autocast=device.type == "cuda", limit_gb=settings.max_memory_gb)
            if ctx.is_main:
                say(f"memory: {summary}")
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
