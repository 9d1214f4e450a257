"""The training loop: `TrainingLoop.run` tells the story, `TrainingLoop.train_step` does one update.

Shape legend: b batch, n frames, d latent channels, nt characters.

One step = ``grad_accum_steps`` micro-batches, then one AdamW update (unless the step is
skipped by the non-finite policy). Order inside `run`: set the learning rate, take a step,
log, maybe evaluate, maybe save — so every record of step s is written before the
checkpoint of step s, and a resume from it replays nothing twice. Ctrl-C and SIGTERM
only raise a flag; the loop stops after the current step and saves.

Syncs: the step reads one boolean back from the device (is the loss and gradient norm
finite?) and converts its metrics to Python numbers only on log steps, in one transfer.

The step's records (`flowkit.train.step_stats`) and the stop flag (`flowkit.train.stop`)
live in modules of their own; `Counters`, `StepStats`, `StepTotals` and `StopFlag` are
importable from here too.
"""

from __future__ import annotations

import contextlib
import errno
import math
import time
from collections.abc import Sequence
from typing import Any

import torch

from flowkit.batching.builder import BatchBuilder
from flowkit.batching.collate import Batch
from flowkit.batching.pairing import PairingCounts
from flowkit.batching.prefetch import StepPrefetcher
from flowkit.batching.samplers import BatchStream
from flowkit.checkpoints import files as checkpoint
from flowkit.errors import TrainingError
from flowkit.model.flops import peak_tflops, train_step_flops
from flowkit.train import distributed
from flowkit.train.collection import GarbageCollection
from flowkit.train.distributed import DistContext
from flowkit.train.ema import EMA
from flowkit.train.evaluation import Evaluator
from flowkit.train.objective import draw_flow, loss_names, loss_terms, unit_sums, unit_weighted
from flowkit.train.optimization import set_learning_rate
from flowkit.train.randomness import RandomStreams
from flowkit.train.settings import Trainer
from flowkit.train.step_stats import Counters, StepStats, StepTotals
from flowkit.train.stop import StopFlag
from flowkit.train.workspace import Workspace

#: errno values of a write that failed for lack of space (disk, quota, file size limit).
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

__all__ = ["Counters", "StepStats", "StepTotals", "StopFlag", "TrainingLoop"]


class TrainingLoop:
    """Owns the model, optimizer, EMA, batch stream and random streams of a run.

    Built by `flowkit.train.run` from the parts of a run (`flowkit.train.parts.build_parts`)
    once their state is restored; ``meta`` is the static part of every checkpoint's
    ``meta.json``.
    """

    def __init__(
        self,
        settings: Trainer,
        parts: Any,
        *,
        workspace: Workspace,
        loggers: Sequence[Any],
        device: torch.device,
        meta: dict[str, Any],
        counters: Counters,
        pairing_totals: PairingCounts | None = None,
        resumed: bool = False,
        dist: DistContext | None = None,
        ddp: torch.nn.Module | None = None,
    ) -> None:
        self.settings = settings
        # the parts of the run (`flowkit.train.parts.RunParts`), already restored
        model = self.model = parts.model
        self.ema: EMA = parts.ema
        self.optimizer: torch.optim.Optimizer = parts.optimizer
        self.stream: BatchStream = parts.stream
        self.streams: RandomStreams = parts.streams
        self.builder: BatchBuilder = parts.builder
        self.evaluator: Evaluator | None = parts.evaluator
        self.probe = parts.probe  # a flowkit.train.probe.ProbeRunner on rank 0 when Trainer.probe is set
        self.workspace = workspace
        self.loggers = list(loggers)
        self.device = device
        self.meta = meta
        self.counters = counters
        self.pairing_totals = pairing_totals or PairingCounts()
        self.resumed = resumed
        self.autocast = device.type == "cuda"
        self.peak_tflops = peak_tflops(torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                                       settings.peak_tflops)
        self.names = loss_names(settings.losses)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.stop = StopFlag()
        self.last_saved = counters.step if resumed else None
        self._overfit: list[Batch] | None = None
        # The next steps' micro-batches are built in a background thread while this step
        # trains (flowkit.batching.prefetch); checkpoints record the sampler position and
        # data stream of the last consumed step, never those of a prefetched one.
        # Steps are planned (every draw) in order in one thread and assembled (reads,
        # collation) by batch_workers threads at once: the same batches as one thread.
        self.prefetcher = StepPrefetcher(self._plan_step, self._data_snapshot,
                                         enabled=settings.prefetch and not settings.overfit_one_batch,
                                         depth=settings.prefetch_steps, workers=settings.build_workers(),
                                         assemble=self._assemble_step)
        # Python's garbage collector runs at fixed steps, not inside a batch build
        # (flowkit.train.collection)
        self.collection = GarbageCollection(settings.gc_every)
        self._consumed: dict[str, Any] | None = None
        self._evaluated: tuple[tuple[int, int], dict[str, float]] | None = None  # (step, updates), metrics
        self._window = PairingCounts()
        # torch.distributed: ``model`` is the unwrapped module (EMA, evaluation, checkpoints);
        # ``ddp`` runs the training forward passes and averages gradients across ranks.
        self.dist = dist or DistContext()
        self.ddp = ddp if ddp is not None else model
        self.stopping = False  # a stop requested on any rank, agreed after the last step

    def should_stop(self) -> bool:
        """Whether a stop was requested on any rank; every rank gets the same answer, so all
        leave the loop after the same step (one all-reduce of a flag under torch.distributed)."""
        self.stopping = distributed.any_rank(self.dist, self.stop.requested)
        return self.stopping

    # ---- the loop ----

    def run(self) -> str:
        """Train to ``settings.steps`` or a stop request; returns "completed" or "interrupted".

        Raises:
            TrainingError: a non-finite loss or gradient (policy "stop", or too many skips),
                or a write that failed for lack of space (the last committed checkpoint and
                the metrics lines before it are intact).
        """
        try:
            return self._run()
        except OSError as exc:
            if exc.errno not in _DISK_FULL:
                raise
            c = self.counters
            raise TrainingError(
                f"cannot write to {self.workspace.root} at step {c.step} ({exc.strerror or exc}); "
                f"the last committed checkpoint is intact: free space, then `flowkit resume {self.workspace.root}`"
            ) from exc

    def _run(self) -> str:
        s, c = self.settings, self.counters
        with self.stop.installed(), contextlib.closing(self.prefetcher), self.collection:
            if not self.resumed and s.eval_every is not None:
                self.evaluate()
            if not self.resumed and self.probe is not None:
                self.log({"kind": "probe_ceiling", "step": c.step, **self.probe.ceilings()})
                if self.probe.settings.at_start:
                    self.run_probe()
            while c.step < s.steps and not self.should_stop():
                self.collection.maybe_collect(c.step)
                stats = self.train_step(self.set_lr())
                if self.should_run(s.log_every):
                    self.log_step(stats)
                if self.should_run(s.eval_every):
                    self.evaluate()
                if self.probe is not None and self.should_run(self.probe.settings.every):
                    self.run_probe()
                if self.should_run(s.save_every):
                    self.save()
            if self.last_saved != c.step:
                self.save()
        if self.stopping and c.step < s.steps:
            self.log({"kind": "event", "step": c.step, "event": "stopped", "signal": self.stop.signal})
            return "interrupted"
        return "completed"

    def should_run(self, every: int | None) -> bool:
        """Whether a periodic action (log, evaluate, save) is due after the step just taken:
        every ``every`` steps and at the last step; never when ``every`` is None."""
        step = self.counters.step
        return every is not None and (step % every == 0 or step == self.settings.steps)

    def set_lr(self) -> float:
        """``lr * lr_schedule(updates, horizon)``: counted in optimizer updates."""
        c = self.counters
        lr = self.settings.lr * float(self.settings.lr_schedule(c.updates, c.horizon))
        set_learning_rate(self.optimizer, lr)
        return lr

    # ---- one step ----

    def next_batches(self) -> tuple[list[Batch], PairingCounts]:
        """The CPU micro-batches of the next step (the same one again with overfit_one_batch)."""
        if self._overfit is not None:
            return self._overfit, PairingCounts()
        got = self.prefetcher.get()
        self._consumed = got.state
        batches, counts = got.value
        if self.settings.overfit_one_batch:
            self._overfit = batches
        return batches, counts

    def _plan_step(self) -> list[Any]:
        """The plans of one step's micro-batches: the sampler's next batches and every draw
        from the data stream (in the prefetch thread: it owns both between plans)."""
        plans = []
        for _ in range(self.settings.grad_accum_steps):
            _, indices = self.stream.next()
            plans.append(self.builder.plan(indices, self.streams.data, train=True))
        return plans

    def _assemble_step(self, plans: Sequence[Any]) -> tuple[list[Batch], PairingCounts]:
        """One step's CPU micro-batches from their plans (in a build worker; draws nothing),
        pinned for asynchronous copies on CUDA."""
        batches, counts = [], PairingCounts()
        for plan in plans:
            batch, plan_counts = self.builder.assemble(plan)
            batches.append(batch.pin_memory() if self.device.type == "cuda" else batch)
            counts.add(plan_counts)
        return batches, counts

    def _data_snapshot(self) -> dict[str, Any]:
        """Sampler position and data-stream state right after a step's plan (see `_plan_step`)."""
        return {"sampler": self.stream.state_dict(), "data": self.streams.data.bit_generator.state}

    def _sampler_state(self) -> dict[str, Any]:
        return self._consumed["sampler"] if self._consumed is not None else self.stream.state_dict()

    def train_step(self, lr: float) -> StepStats:
        """One optimizer step over ``grad_accum_steps`` micro-batches.

        Raises:
            TrainingError: non-finite loss or gradient norm under the "stop" policy, or
                ``max_consecutive_skips`` skipped steps in a row under "skip".
        """
        s, c = self.settings, self.counters
        started = time.perf_counter()
        batches, counts = self.next_batches()
        totals = self.step_totals(batches)
        data_s = time.perf_counter() - started
        self.ddp.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss = torch.zeros((), device=self.device)
        terms: dict[str, torch.Tensor] = {}
        for i, cpu_batch in enumerate(batches):
            batch = cpu_batch.to(self.device, non_blocking=True)
            t, x0 = draw_flow(batch.x1.shape, s.t_sampler, self.streams.flow)
            # DDP all-reduces the gradients once per step: in the last micro-batch's backward.
            with self.maybe_no_sync(last=i == len(batches) - 1):
                named, _ = loss_terms(self.ddp, s.schedule, s.losses, self.names, batch.x1, batch.cond, t, x0,
                                      autocast=self.autocast)
                # loss = sum_terms weight * sum_i value_i * count_i / total: each term averaged
                # over its own unit across the whole step, so k micro-batches equal one batch.
                shares = unit_weighted(named, totals.units)
                objective = sum((term.weight * shares[term.name] for term in named),
                                torch.zeros((), device=self.device))
                objective.backward()
            loss = loss + objective.detach()
            for name, share in shares.items():
                terms[name] = terms[name] + share.detach() if name in terms else share.detach()
        if self.dist.enabled:
            loss, terms = self._global_loss(loss, terms)
        max_norm = s.grad_clip if s.grad_clip is not None else math.inf
        # foreach: one multi-tensor norm (on the CPU torch's default is a per-tensor loop, 5x slower)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm, foreach=True)
        # The one sync of a step: a NaN/inf must not reach the weights, the EMA or Adam's moments.
        finite = bool(torch.isfinite(loss) & torch.isfinite(grad_norm))
        skipped = not finite and self._nonfinite(loss, grad_norm)
        if not skipped:
            self.optimizer.step()
            self.ema.update(self.model)
            c.updates += 1
            c.consecutive_skips = 0
        self.optimizer.zero_grad(set_to_none=True)
        c.step += 1
        self.pairing_totals.add(counts)
        self._window.add(counts)
        return StepStats(
            step=c.step, loss=loss.detach(), terms=terms, grad_norm=grad_norm.detach(), lr=lr,
            items=totals.items, real_frames=totals.real_frames, target_frames=totals.target_frames,
            step_s=time.perf_counter() - started, data_s=data_s, skipped=skipped, flops=self._flops(batches),
        )

    def _flops(self, batches: Sequence[Batch]) -> float:
        """Model FLOPs of a step (`flowkit.model.flops`); 0 for a model that is not the DiT."""
        if not hasattr(self.model, "cfg") or not hasattr(self.model.cfg, "sizes"):
            return 0.0
        total = 0.0
        for b in batches:
            cond = b.conditions  # the masks: the CPU batch, no prompt made
            lengths = list(cond.layout.lengths) if cond.layout is not None else cond.frame_mask.sum(1).tolist()
            total += train_step_flops(
                self.model, lengths, cond.text_mask.sum(1).tolist(), padded_frames=cond.frame_mask.numel(),
                padded_chars=cond.text.numel(),
                packed_frames=cond.layout.num_frames if cond.layout is not None else None,
            )
        return total * self.dist.world_size

    def maybe_no_sync(self, *, last: bool) -> contextlib.AbstractContextManager[Any]:
        """DDP's ``no_sync`` for every micro-batch but the last (nothing for one process)."""
        no_sync = getattr(self.ddp, "no_sync", None)
        return no_sync() if no_sync is not None and not last else contextlib.nullcontext()

    def step_totals(self, batches: Sequence[Batch]) -> StepTotals:
        """The unit totals that weight the step's micro-batches, and its item/frame counts,
        counted on the CPU batches (no device sync).

        Under torch.distributed the counts are summed over the ranks (one all-reduce), so a
        step equals one batch of every rank's items: a micro-batch's weight is then
        ``count_i / global_total * world_size``, the factor undoing DDP's average of the
        ranks' gradients.
        """
        counts = {f"unit/{unit}": total for unit, total in unit_sums(b.conditions for b in batches).items()}
        counts["items"] = sum(b.batch_size for b in batches)
        counts["real_frames"] = sum(b.num_real_frames for b in batches)
        counts["target_frames"] = sum(b.num_target_frames for b in batches)
        summed = dict(zip(counts, distributed.all_sum(self.dist, list(counts.values())), strict=True))
        world = self.dist.world_size
        units = {key.removeprefix("unit/"): max(value, 1.0) / world
                 for key, value in summed.items() if key.startswith("unit/")}
        return StepTotals(units, int(summed["items"]), int(summed["real_frames"]), int(summed["target_frames"]))

    def _global_loss(self, loss: torch.Tensor,
                     terms: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The step loss and terms over all ranks (each rank's share is scaled by world_size).

        Every rank then takes the same skip-or-step decision on a non-finite value.
        """
        zero = torch.zeros((), device=loss.device)
        values = torch.stack([loss, *(terms.get(name, zero) for name in self.names)])
        distributed.all_mean_(self.dist, values)
        return values[0], {name: values[i + 1] for i, name in enumerate(self.names) if name in terms}

    def _nonfinite(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> bool:
        """Apply the non-finite policy; True when the step is skipped (else raises)."""
        s, c = self.settings, self.counters
        what = "loss" if not bool(torch.isfinite(loss)) else "gradient norm"
        at = f"non-finite {what} at step {c.step + 1} (loss {float(loss):.4g}, gradient norm {float(grad_norm):.4g})"
        if s.nonfinite == "stop":
            saved = any(True for _ in checkpoint.list_checkpoints(self.workspace.checkpoints))
            where = (f"last checkpoint in {self.workspace.checkpoints}" if saved else
                     f"no checkpoint was saved yet: Trainer.save_every = {s.save_every}")
            raise TrainingError(
                f"{at}; the run stopped without applying it ({where}) — lower Trainer.lr or set "
                "Trainer.nonfinite = 'skip'"
            )
        if c.consecutive_skips + 1 >= s.max_consecutive_skips:
            # the stopping step is not taken: it counts neither as a step nor as a skip
            raise TrainingError(
                f"{at}: {c.consecutive_skips + 1} steps in a row non-finite (Trainer.max_consecutive_skips = "
                f"{s.max_consecutive_skips}); lower Trainer.lr or check the data"
            )
        c.skipped += 1
        c.consecutive_skips += 1
        self.log({"kind": "event", "step": c.step + 1, "event": "skipped_nonfinite", "what": what})
        return True

    # ---- logging, evaluation, saving ----

    def log(self, record: dict[str, Any]) -> None:
        """Send ``record`` (``kind``, ``step``, values) to every logger (none off rank 0)."""
        for logger in self.loggers:
            logger.log(record)

    def log_step(self, stats: StepStats) -> None:
        """Log the ``train`` record of the step just taken and rewrite the heartbeat.

        Reads the step's device scalars back in one transfer (the log step's only sync).
        """
        s, c = self.settings, self.counters
        terms = list(stats.terms.items()) if len(stats.terms) > 1 else []
        loss, grad_norm, *values = torch.stack(
            [stats.loss, stats.grad_norm.to(stats.loss.device), *(v for _, v in terms)]
        ).tolist()
        record: dict[str, Any] = {
            "kind": "train", "step": c.step, "loss": loss, "lr": stats.lr,
            "grad_norm": grad_norm, "items": stats.items, "frames": stats.real_frames,
            "target_frames": stats.target_frames, "epoch": int(self._sampler_state()["epoch"]),
            "updates": c.updates, "skipped": c.skipped,
        }
        record.update({f"loss/{name}": value for (name, _), value in zip(terms, values, strict=True)})
        if self._window.items and self.settings.pairing.cross_pass() is not None:
            record["cross_frac"] = self._window.cross_frac
            record["cross_fallback_frac"] = self._window.fallback_frac
        self._window = PairingCounts()
        if self.device.type == "cuda":
            record["max_mem_gb"] = torch.cuda.max_memory_allocated(self.device) / 1e9
        # Wall-clock fields: the only ones that differ between a run and its resumed twin.
        record["frames_per_s"] = stats.real_frames / max(stats.step_s, 1e-9)
        record["tflops"] = stats.flops / max(stats.step_s, 1e-9) / 1e12  # model FLOPs (flowkit.model.flops)
        if self.peak_tflops:
            record["mfu"] = record["tflops"] / self.peak_tflops
        record["step_s"] = stats.step_s
        record["data_s"] = stats.data_s
        record["best_val_loss"] = c.best_val_loss
        self.log(record)
        if self.dist.is_main:
            self.workspace.write_heartbeat(c.step, s.steps)

    def evaluate(self) -> dict[str, float]:
        """Run the validation passes, log them, and keep the best EMA checkpoint in ``best/``."""
        if self.evaluator is None:
            return {}
        c = self.counters
        if self._evaluated is not None and self._evaluated[0] == (c.step, c.updates):
            return self._evaluated[1]  # these weights were evaluated and logged already
        # Rank 0 alone evaluates (the numbers of one process); the others wait in the broadcast.
        metrics = self.evaluator.evaluate(self.model, self.ema) if self.dist.is_main else {}
        metrics = distributed.broadcast_object(self.dist, metrics)
        self._evaluated = ((c.step, c.updates), metrics)
        if not metrics:
            return metrics
        current = metrics.get("val_loss_ema")
        improved = current is not None and (c.best_val_loss is None or current < c.best_val_loss)
        if improved:
            c.best_val_loss = current
        self.log({"kind": "eval", "step": c.step, **metrics, "best_val_loss": c.best_val_loss})
        if improved and c.step > 0:
            state = self.state_dict()  # a collective under torch.distributed: every rank takes part
            if self.dist.is_main:
                checkpoint.save_checkpoint(self.workspace.best, c.step, state, self.checkpoint_meta(), keep_last=1)
        return metrics

    def run_probe(self) -> dict[str, Any]:
        """Probe intelligibility (`flowkit.train.probe`), log a ``probe`` record and keep the
        sentences of the latest and of the best (lowest WER) probe under ``probe/``."""
        from flowkit.train.probe import write_probe_outputs

        step = self.counters.step
        values = self.probe.probe(self.model, self.ema)
        self.log({"kind": "probe", "step": step, **values})
        root = self.workspace.root / "probe"
        write_probe_outputs(root / "latest", step, values, self.probe)
        if self.probe.improves(values.get("probe_wer"), root / "best", (values.get("judges") or {}).get("asr")):
            write_probe_outputs(root / "best", step, values, self.probe)
        return values

    def state_dict(self) -> dict[str, Any]:
        """Everything a bit-identical resume needs (tensors and plain values only).

        Under torch.distributed this is a collective: every rank's random streams, sampler
        position and pairing totals are gathered into ``ranks`` (index = rank), with
        ``world_size``; the top-level ``rng``/``sampler``/``pairing_totals`` are rank 0's.
        """
        rng = self.streams.capture()
        if self._consumed is not None:  # not the state a prefetched, unconsumed step advanced
            rng["data"] = self._consumed["data"]
        own = {"sampler": self._sampler_state(), "rng": rng,
               "pairing_totals": self.pairing_totals.to_dict()}
        ranks = distributed.gather_objects(self.dist, own)
        state = {
            "model": self.model.state_dict(),
            "ema": self.ema.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "counters": self.counters.to_dict(),
            **ranks[0],
        }
        if self.dist.enabled:
            state["world_size"] = self.dist.world_size
            state["ranks"] = ranks
        return state

    def checkpoint_meta(self) -> dict[str, Any]:
        """The checkpoint's ``meta.json``: the run's static meta plus counters and pairing totals."""
        return {**self.meta, "counters": self.counters.to_dict(), "pairing_totals": self.pairing_totals.to_dict()}

    def save(self) -> None:
        """Commit ``checkpoints/step-<step>`` (rank 0 writes; every rank joins the gather).

        Raises:
            OSError: the write failed (`run` turns a full disk into a `TrainingError`).
        """
        s, c = self.settings, self.counters
        state = self.state_dict()  # a collective under torch.distributed: every rank takes part
        if self.dist.is_main:
            checkpoint.save_checkpoint(
                self.workspace.checkpoints, c.step, state, self.checkpoint_meta(), keep_last=s.keep_last
            )
        self.last_saved = c.step
