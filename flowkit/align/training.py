"""Training an aligner run: start, or continue the run already in the folder (the same command).

Layout of ``RUN`` (as a TTS run's, `flowkit.train.workspace`): ``run.lock``,
``checkpoints/step-*``, ``metrics.jsonl``, ``config.gin`` with ``config_sources/``,
``run_info.json``, and ``report/`` (loss curve and alignment plots, `flowkit.align.plots`).

Kill it at any moment: the rerun resumes from the newest valid checkpoint and trains the
same bits, because each step's batch comes from (seed, step) alone, the learning rate from
the step alone, and the checkpoint holds the weights and Adam's moments.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flowkit import config as gin_config
from flowkit.align.corpus import AlignCorpus, collate, load_corpus
from flowkit.align.model import beta_binomial_log_prior, binarisation_loss, forward_sum_loss
from flowkit.align.search import maximum_path
from flowkit.align.settings import AlignRun
from flowkit.align.tokens import pause_id
from flowkit.checkpoints.files import find_latest, load_checkpoint, save_checkpoint
from flowkit.console import Progress, say, warn
from flowkit.errors import ConfigError, DataError, ResumeError
from flowkit.loggers.jsonl import encode_record, truncate_after_step
from flowkit.train.workspace import Workspace, git_commit

__all__ = ["RUN_KIND", "batch_indices", "build_network", "train_aligner"]

RUN_KIND = "aligner"  # checkpoint meta "kind" of an aligner run


def batch_indices(settings: AlignRun, usable: np.ndarray, n_frames: np.ndarray, step: int) -> list[int]:
    """The corpus indices of step ``step``'s batch: a permutation drawn from (seed, step),
    filled in its order up to ``batch_frames`` padded frames and ``max_items`` items."""
    rng = np.random.default_rng([settings.seed, step])
    chosen: list[int] = []
    longest = 0
    for i in rng.permutation(usable).tolist():
        length = int(n_frames[i])
        if chosen and (len(chosen) + 1) * max(longest, length) > settings.batch_frames:
            continue
        chosen.append(i)
        longest = max(longest, length)
        if len(chosen) == settings.max_items:
            break
    return chosen


def lr_at(settings: AlignRun, step: int) -> float:
    """Linear warm-up over ``warmup_steps``, then constant (step counts from 0)."""
    if settings.warmup_steps and step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    return settings.lr


def build_network(aligner: Any, vocab: Any, latent_dim: int) -> torch.nn.Module:
    """The aligner network for ``vocab`` (its ids and the pause token)."""
    return aligner.build(pause_id(vocab) + 1, latent_dim)


def step_loss(model: torch.nn.Module, settings: AlignRun, corpus: AlignCorpus, index: Sequence[int],
              step: int) -> tuple[torch.Tensor, dict[str, float]]:
    """The training loss of one batch and its terms (forward-sum, and binarisation from ``bin_start``)."""
    batch = collate(corpus, index)
    prior = beta_binomial_log_prior(batch.n_tokens, batch.n_frames, batch.tokens.shape[1], batch.latents.shape[1],
                                    settings.aligner.prior_scale)
    log_attn = model(batch.tokens, batch.token_mask, batch.latents, batch.frame_mask, prior)
    ctc = forward_sum_loss(log_attn, batch.n_tokens, batch.n_frames, settings.aligner.blank_log_p).mean()
    loss = ctc
    terms = {"forward_sum": float(ctc.detach())}
    if step >= settings.bin_start and settings.bin_weight > 0:
        path = maximum_path(log_attn.detach(), batch.n_tokens, batch.n_frames)
        binar = binarisation_loss(log_attn, path).mean()
        loss = loss + settings.bin_weight * binar
        terms["binarisation"] = float(binar.detach())
    return loss, terms


def _steps_free(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("AlignRun.steps"))


def _parse(config_files: Sequence[str | Path], bindings: Sequence[str], data: Sequence[Path],
           steps: int | None) -> tuple[Any, AlignRun]:
    extra = list(bindings)
    missing = [str(p) for p in data if not Path(p).exists()]
    if missing:
        raise DataError(f"--data {missing[0]}: no such store; give a store made by flowkit prepare (NAME.zarr)")
    if data:
        extra.append("AlignRun.data = [" + ", ".join(repr(str(Path(p).resolve())) for p in data) + "]")
    if steps is not None:
        extra.append(f"AlignRun.steps = {int(steps)}")
    parsed = gin_config.parse(config_files, extra)
    if config_files and not any(re.search(r"^\s*(AlignRun|aligner\.learned)\.", text, re.MULTILINE)
                                for _, text in parsed.sources):
        names = " ".join(str(f) for f in config_files)
        raise ConfigError(f"{names} binds no AlignRun: it is not an aligner experiment; start from gin/align.gin "
                          f"(a TTS experiment trains with `flowkit train {names}`)")
    settings = AlignRun()
    if not settings.data:
        raise ConfigError("the aligner has no data: give --data STORE (or bind AlignRun.data in the gin file)")
    return parsed, settings


def train_aligner(config_files: Sequence[str | Path], bindings: Sequence[str] = (), *, data: Sequence[Path] = (),
                  out: Path, steps: int | None = None, progress: bool = True) -> Path:
    """Train (or continue) the aligner run of ``config_files`` in ``out``; returns the last checkpoint.

    Raises:
        ConfigError: a bad config; ResumeError: ``out`` holds an aligner run of another
        config or other data; DataError: stores that cannot be read; TrainingError: another
        live process trains in ``out``; CheckpointError: no valid checkpoint to resume from.
    """
    parsed, settings = _parse(config_files, bindings, data, steps)
    workspace = Workspace(Path(out))
    with workspace.lock():
        return _train(workspace, parsed, settings, progress)


def _train(workspace: Workspace, parsed: Any, settings: AlignRun, progress: bool) -> Path:
    latest, skipped = find_latest(workspace.checkpoints)
    for path, why in skipped:
        warn(f"{path}: {why}; resuming from an older checkpoint")
    config = parsed.text
    ckpt = None
    info_file = workspace.root / "run_info.json"
    if latest is not None or info_file.exists():
        if latest is not None:
            ckpt = load_checkpoint(latest)
            kind = ckpt.meta.get("kind")
        else:
            try:
                kind = json.loads(info_file.read_text(encoding="utf-8")).get("kind")
            except (OSError, ValueError, AttributeError):
                kind = None
        if kind != RUN_KIND:
            raise ResumeError(f"{workspace.root} holds a run that is not an aligner run; give a new --out")
        saved = workspace.config.read_text(encoding="utf-8") if workspace.config.exists() else ""
        if _steps_free(saved) != _steps_free(config):
            raise ResumeError(f"{workspace.root} holds an aligner run of another config; give a new --out, or rerun "
                              "with the config it was started with (only AlignRun.steps may change)")
        if ckpt is None:  # killed before its first checkpoint: it starts again from step 0
            workspace.metrics.unlink(missing_ok=True)

    from flowkit.text.vocabs import build_vocab_for, vocab_from_state_dict

    if ckpt is None:
        corpus, vocab, stats = load_corpus(settings.data, lambda t, lang: build_vocab_for(settings.text, t, lang),
                                           progress=progress)
    else:
        corpus, vocab, stats = load_corpus(settings.data, vocab_from_state_dict(ckpt.meta["vocab"]),
                                           ckpt.meta["stats"], progress=progress)
        if corpus.fingerprint != ckpt.meta["fingerprint"]:
            raise ResumeError(f"{workspace.root} was trained on other data "
                              f"(fingerprint {ckpt.meta['fingerprint'][:12]}, "
                              f"now {corpus.fingerprint[:12]}); give a new --out to align this data")
    usable = corpus.alignable()
    if len(usable) == 0:
        raise DataError(f"no segment of {', '.join(settings.data)} can be aligned (each needs a word and at least "
                        "as many frames as tokens)")
    n_frames = corpus.n_frames
    latent_dim = corpus.latents[0].shape[1]
    torch.manual_seed(settings.seed)
    model = build_network(settings.aligner, vocab, latent_dim)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=(0.9, 0.98), weight_decay=0.0)
    start = 0
    window: list[float] = []
    if ckpt is not None:
        model.load_state_dict(ckpt.state["model"])
        optimizer.load_state_dict(ckpt.state["optimizer"])
        start = ckpt.step
        window[:] = [float(x) for x in ckpt.state.get("window", [])]
        truncate_after_step(workspace.metrics, start)
    else:
        workspace.create()
        workspace.write_config(config, [Path(p) for p, _ in parsed.sources])
        workspace.write_run_info({"kind": RUN_KIND, "config_files": [str(f) for f in parsed.files],
                                  "bindings": list(parsed.bindings), "stores": list(settings.data),
                                  "fingerprint": corpus.fingerprint, "segments": len(corpus.tokens),
                                  "alignable": int(len(usable)), "git_commit": git_commit(),
                                  "torch": torch.__version__}, resumed_at=None)
    meta = {"kind": RUN_KIND, "config": config, "vocab": vocab.state_dict(), "stats": stats, "latent_dim": latent_dim,
            "fingerprint": corpus.fingerprint, "aligner": settings.aligner.to_dict(),
            "front_end": type(settings.text).__name__}
    say(f"aligner: {len(usable)} of {len(corpus.tokens)} segments, {int(n_frames[usable].sum())} frames, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters; "
        + (f"resuming at step {start}" if start else f"training {settings.steps} steps"))

    def save(step: int) -> Path:
        # the losses since the last record travel too: a resumed run's records equal the uninterrupted run's
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "window": list(window)}
        return save_checkpoint(workspace.checkpoints, step, state, meta, keep_last=settings.keep_last)

    last = latest
    step = start
    model.train()
    with workspace.metrics.open("a", encoding="utf-8") as metrics, \
            Progress("align", settings.steps, completed=start, unit="steps", plain_every=settings.log_every,
                     enabled=progress) as bar:
        try:
            while step < settings.steps:
                started = time.perf_counter()
                lr = lr_at(settings, step)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                index = batch_indices(settings, usable, n_frames, step)
                loss, terms = step_loss(model, settings, corpus, index, step)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip))
                if not (math.isfinite(float(loss.detach())) and math.isfinite(grad_norm)):
                    raise DataError(f"non-finite aligner loss at step {step + 1} (batch {index[:4]}...); "
                                    "lower AlignRun.lr")
                optimizer.step()
                step += 1
                last_loss = float(loss.detach())
                window.append(last_loss)
                if step % settings.log_every == 0:  # the loss averaged over the steps since the last record
                    record = {"kind": "train", "step": step, "loss": sum(window) / len(window), **terms, "lr": lr,
                              "grad_norm": grad_norm, "items": len(index), "step_s": time.perf_counter() - started}
                    metrics.write(encode_record(record) + "\n")
                    metrics.flush()
                    window = []
                bar.update(1, loss=last_loss, **{k[:3]: v for k, v in terms.items()})
                if step % settings.save_every == 0 or step == settings.steps:
                    last = save(step)
                    workspace.write_heartbeat(step, settings.steps)
        except KeyboardInterrupt:
            if step > start:
                last = save(step)
            say(f"aligner: interrupted at step {step}; rerun the same command to continue")
            raise
    from flowkit.align.plots import write_report

    write_report(workspace.root, corpus=corpus, model=model, progress=progress)
    return last  # type: ignore[return-value]
