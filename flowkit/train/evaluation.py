"""Validation on fixed batches: the same spans, t and noise at every evaluation.

Shape legend: b batch, n frames, d latent channels, nt characters.

The validation batches, their pairing plans and their flow draws come from evaluation
generators derived from the seed (`flowkit.train.randomness.eval_generators`), prepared
once and reused, so successive evaluations differ only by the weights and never touch
the training streams. No CFG dropout. Passes (metric names in ``metrics.jsonl``):

- ``val_loss``: raw weights; ``val_loss_ema``: EMA weights (picks the best checkpoint);
- ``val_loss_ema_notext``: EMA with every item's text dropped; ``text_gain`` =
  ``val_loss_ema_notext - val_loss_ema`` measures how much the model uses the text (at or
  below zero: the text does not help the model yet);
- ``val_loss_ema_even`` (aligned text path): characters spread evenly inside their units,
  as at inference (training divides units by the predicted durations);
- ``val_loss_ema_cross`` (pairing ``cross_segment``): a fixed set of items whose prompt is
  another segment of the same speaker (the inference situation), ``val_cross_items``;
- ``val_tempo_<emotion>`` (``dur_cond = "emotion"``): mean predicted duration in frames
  per character of the items labelled with that emotion (EMA weights).

A pass's loss combines its terms like a training step (each term averaged over its own
units across all batches, times ``loss.<name>.weight``); with several terms each one is
also reported as ``<pass>/<term>``.

What an evaluation costs is in its record: ``eval_batches`` (validation batches per pass,
at most ``Trainer.eval_batches``), ``eval_cross_batches`` (those of the cross-segment pass),
``eval_passes`` (forward passes over those batches) and ``eval_s`` (its wall-clock
seconds). Nothing is computed twice: while the EMA weights equal the raw ones (step 0 of a
fresh run, whose EMA starts as a copy) the raw pass is the EMA pass, and its numbers are
reported under both names (the same forward pass on the same weights gives the same bits).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import torch

from flowkit.batching.builder import BatchBuilder
from flowkit.batching.collate import Batch
from flowkit.batching.pairing import PairingCounts
from flowkit.data.labels import EMOTIONS
from flowkit.model.durations import durations_from_log, in_unit_chars
from flowkit.train.ema import EMA
from flowkit.train.objective import draw_flow, loss_names, loss_terms, unit_sums, unit_weighted
from flowkit.train.randomness import derive_seed, eval_generators

__all__ = ["Evaluator", "FixedBatch", "ema_equals"]


@attrs.frozen
class FixedBatch:
    """A prepared validation batch with its flow draws (CPU tensors)."""

    batch: Batch
    t: torch.Tensor
    x0: torch.Tensor


class Evaluator:
    """Runs the validation passes of a run (see the module docstring).

    Args:
        builder: builds validation batches (its dataset is the validation split).
        batch_sampler: the run's batch sampler (same budget as training).
        settings: the run's `Trainer` (schedule, t-sampler, losses, eval_batches, seed).
        model_config: the `DiTConfig` (text path, dur_cond).
        device: where the model lives; ``autocast``: bf16 autocast (CUDA only).
    """

    def __init__(self, builder: BatchBuilder, batch_sampler: Any, settings: Any, model_config: Any,
                 device: torch.device, *, autocast: bool) -> None:
        self.builder = builder
        self.batch_sampler = batch_sampler
        self.settings = settings
        self.model_config = model_config
        self.device = device
        self.autocast = autocast
        self.names = loss_names(settings.losses)
        self._fixed: list[FixedBatch] | None = None
        self._cross: list[FixedBatch] | None = None
        self.cross_counts = PairingCounts()

    # ---- fixed batches ----

    def _prepare(self, pairing: Any, name: str) -> tuple[list[FixedBatch], PairingCounts]:
        """The first ``eval_batches`` batches of pass ``name`` with their flow draws, and
        the pairing outcome over them (from generators of their own, the same every call)."""
        segments = self.builder.dataset.segments
        lengths = pairing.budget_lengths(segments)
        plan = self.batch_sampler.epoch_batches(lengths, derive_seed(self.settings.seed, f"eval/{name}/batches"), 0)
        rng, generator = eval_generators(self.settings.seed, name)
        builder = attrs.evolve(self.builder, pairing=pairing)
        out, counts = [], PairingCounts()
        for indices in plan.batches[: self.settings.eval_batches]:
            batch, batch_counts = builder.build(indices, rng, train=False)
            counts.add(batch_counts)
            t, x0 = draw_flow(batch.latents.shape, self.settings.t_sampler, generator)
            out.append(FixedBatch(batch, t, x0))
        return out, counts

    def fixed_batches(self) -> list[FixedBatch]:
        """The validation batches of every pass, built on the first call."""
        if self._fixed is None:
            self._fixed, _ = self._prepare(self.builder.pairing, "val")
        return self._fixed

    def cross_batches(self) -> list[FixedBatch] | None:
        """The batches of the cross-segment pass (built on the first call), or None when
        the run's pairing has no cross-segment prompts."""
        cross = self.builder.pairing.cross_pass()
        if cross is None:
            return None
        if self._cross is None:
            self._cross, self.cross_counts = self._prepare(cross, "cross")
        return self._cross

    # ---- passes ----

    @torch.no_grad()
    def _pass(self, model: torch.nn.Module, batches: Sequence[FixedBatch], *, no_text: bool = False,
              phase: str = "predicted", tempo: dict[int, list[float]] | None = None) -> dict[str, float]:
        totals = {unit: max(total, 1.0) for unit, total in unit_sums(f.batch.conditions for f in batches).items()}
        sums: dict[str, torch.Tensor] = {}
        weights: dict[str, float] = {}
        for fixed in batches:
            batch = fixed.batch.to(self.device)
            cond = batch.cond
            if no_text:
                cond = cond.replace(drop_text=torch.ones_like(cond.drop_text))
            terms, log_duration = loss_terms(
                model, self.settings.schedule, self.settings.losses, self.names, batch.x1, cond,
                fixed.t, fixed.x0, autocast=self.autocast, phase=phase,
            )
            for name, share in unit_weighted(terms, totals).items():
                share = share.double()  # summed in float64, as the reported means are
                sums[name] = sums[name] + share if name in sums else share
            weights.update({named.name: named.weight for named in terms})
            if tempo is not None and log_duration is not None:
                self._add_tempo(tempo, cond, log_duration)
        means = {name: float(value) for name, value in sums.items()}
        out = {"": sum(weights[name] * means[name] for name in means)}
        if len(means) > 1:
            out.update({f"/{name}": value for name, value in means.items()})
        return out

    @staticmethod
    def _add_tempo(tempo: dict[int, list[float]], cond: Any, log_duration: torch.Tensor) -> None:
        if cond.char_unit is None or cond.unit_mask is None:
            return
        chars = in_unit_chars(cond.char_unit, cond.text_mask, cond.unit_mask)
        frames = torch.where(chars, durations_from_log(log_duration), torch.zeros_like(log_duration))
        per_item = frames.sum(1).cpu().tolist()
        n_chars = chars.sum(1).cpu().tolist()
        for emotion, known, total, n in zip(cond.emotion.cpu().tolist(), cond.emotion_known.cpu().tolist(),
                                            per_item, n_chars, strict=True):
            if known and emotion > 0 and n > 0:
                entry = tempo.setdefault(int(emotion), [0.0, 0.0])
                entry[0] += total
                entry[1] += n

    def evaluate(self, model: torch.nn.Module, ema: EMA) -> dict[str, float]:
        """Every validation metric for the current weights (model left in train mode), and
        the evaluation's cost (``eval_batches``, ``eval_cross_batches``, ``eval_passes``,
        ``eval_s``: see the module docstring)."""
        started = time.perf_counter()
        batches = self.fixed_batches()
        if not batches:
            return {}
        metrics: dict[str, float] = {}
        passes = 0

        def put(prefix: str, values: dict[str, float]) -> None:
            metrics.update({f"{prefix}{suffix}": value for suffix, value in values.items()})

        def run(batches: Sequence[FixedBatch], **kwargs: Any) -> dict[str, float]:
            nonlocal passes
            passes += 1
            return self._pass(model, batches, **kwargs)

        aligned = self.model_config.text_path == "aligned"
        tempo: dict[int, list[float]] | None = {} if self.model_config.dur_cond == "emotion" else None
        same = ema_equals(ema, model)
        model.eval()
        try:
            if same:  # one pass serves both names (and the tempo, read from the EMA pass)
                raw = run(batches, tempo=tempo)
                put("val_loss", raw)
                put("val_loss_ema", raw)
            else:
                put("val_loss", run(batches))
            with contextlib.nullcontext(model) if same else ema.swapped_in(model):
                if not same:
                    put("val_loss_ema", run(batches, tempo=tempo))
                put("val_loss_ema_notext", run(batches, no_text=True))
                # How much the model uses its text: <= 0 means the text does not help yet.
                metrics["text_gain"] = metrics["val_loss_ema_notext"] - metrics["val_loss_ema"]
                if aligned:
                    put("val_loss_ema_even", run(batches, phase="even"))
                cross = self.cross_batches()
                if cross:
                    put("val_loss_ema_cross", run(cross))
                    metrics["val_cross_items"] = float(self.cross_counts.given)
        finally:
            model.train()
        for emotion, (frames, n) in sorted((tempo or {}).items()):
            name = EMOTIONS[emotion - 1] if 0 < emotion <= len(EMOTIONS) else str(emotion)
            metrics[f"val_tempo_{name}"] = frames / max(n, 1.0)
        out: dict[str, Any] = {key: float(np.float64(value)) for key, value in metrics.items()}
        out["eval_batches"] = len(batches)
        if cross:
            out["eval_cross_batches"] = len(cross)
        out["eval_passes"] = passes
        out["eval_s"] = time.perf_counter() - started  # wall clock: differs between equal runs
        return out


@torch.no_grad()
def ema_equals(ema: EMA, model: torch.nn.Module) -> bool:
    """Whether every EMA weight equals ``model``'s bit for bit (then the EMA passes would
    repeat the raw pass)."""
    state = model.state_dict()
    return all(torch.equal(ema.shadow[name], state[name].float()) for name in ema.names)
