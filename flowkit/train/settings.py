"""The contract of a training run: one gin-configurable settings object, ``Trainer``.

Every component of a run is a field here, named from gin (``Trainer.schedule =
@schedule.cosine_vpred()``); everything else is a plain value with its default and where
that default comes from. `Trainer` only holds and checks values: the loop lives in
`flowkit.train.loop`.

Defaults follow F5-TTS (Chen et al. 2024) for the optimisation of a flow-matching TTS
DiT, except where a note says otherwise; ``gin/base.gin`` restates them for reading.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import gin

from flowkit import registry
from flowkit.batching.prefetch import default_batch_workers
from flowkit.errors import ConfigError
from flowkit.protocols import (
    BatchSampler,
    Logger,
    Loss,
    LRSchedule,
    Model,
    Pairing,
    Schedule,
    Solver,
    TextFrontEnd,
    TSampler,
    Vocoder,
)

__all__ = ["NONFINITE_POLICIES", "SLOT_KINDS", "Trainer"]

#: What a non-finite loss or gradient does: stop the run, or skip that update.
NONFINITE_POLICIES = ("stop", "skip")


def _component(kind: str, name: str, **kwargs: Any) -> Any:
    """A default that builds ``<kind>.<name>`` at construction time (gin bindings apply)."""
    return attrs.Factory(lambda: registry.build(kind, name, **kwargs))


def _components(*names: tuple[str, str]) -> Any:
    return attrs.Factory(lambda: [registry.build(kind, name) for kind, name in names])


#: The kind of each component slot (its protocol is checked when the settings are built).
SLOT_KINDS: dict[str, str] = {
    "model": "model", "schedule": "schedule", "t_sampler": "t_sampler", "losses": "loss",
    "batch_sampler": "batch_sampler", "pairing": "pairing", "lr_schedule": "lr_schedule",
    "loggers": "logger", "solver": "solver", "text": "text",
}


def _stores(value: Any) -> tuple[str, ...]:
    """``Trainer.data`` as a tuple of store paths: one path given as a string is one store."""
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        return (str(value),)
    return tuple(str(v) for v in value)


def _positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"Trainer.{attribute.name} = {value!r} must be >= 1; fix it in the gin file or -b binding")


def _probability(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ConfigError(f"Trainer.{attribute.name} = {value!r} must be in [0, 1); e.g. 0.9999")


@gin.configurable("Trainer")  # the gin name is the class name
@attrs.frozen
class Trainer:
    """Everything that defines a training run (gin: ``Trainer.<field>``).

    Components are built from the registry (``@model.dit()``, ``@loss.masked_mse()``, ...);
    ``steps`` counts training steps, each of ``grad_accum_steps`` micro-batches: an optimizer
    update, or a step skipped under ``nonfinite = 'skip'`` (steps = updates + skipped; the
    learning-rate schedule counts updates only).

    Raises:
        ConfigError: a value out of range, naming ``Trainer.<field>`` and the fix.
    """

    # ---- components ----
    model: Model = _component("model", "dit")
    schedule: Schedule = _component("schedule", "flow_matching")
    # F5-TTS draws t uniformly during training (its sway sampling is inference-only).
    t_sampler: TSampler = _component("t_sampler", "uniform")
    losses: Sequence[Loss] = _components(("loss", "masked_mse"))
    batch_sampler: BatchSampler = _component("batch_sampler", "frame_budget")
    pairing: Pairing = _component("pairing", "in_clip")
    lr_schedule: LRSchedule = _component("lr_schedule", "warmup_cosine")
    # jsonl is always added (the resume check and reports read metrics.jsonl).
    loggers: Sequence[Logger] = _components(("logger", "console"))
    solver: Solver = _component("solver", "euler")  # recorded in checkpoints for synthesis
    # Decodes this run's report samples; None: vocoder.griffin_lim (weight-free) when it inverts
    # the stores' encoder. A vocoder that cannot invert the stores' latents stops the start.
    vocoder: Vocoder | None = None
    text: TextFrontEnd = _component("text", "chars")
    # Parameter-efficient fine-tuning (flowkit.adapters): None trains every weight; @adapter.lora()
    # trains LoRA adapters on a frozen base, which the run starts from (init-from).
    adapter: Any = None

    # ---- data ----
    # Latent stores (zarr); empty = the bundled demo store (flowkit.data.demo.demo_store_path).
    data: Sequence[str] = attrs.field(default=(), converter=_stores)
    min_frames: int = attrs.field(default=8, validator=_positive)  # shorter segments are rejected

    # ---- length and randomness ----
    steps: int = attrs.field(default=100_000, validator=_positive)  # training steps: optimizer updates + skipped steps
    seed: int = 0

    # ---- optimisation ----
    lr: float = 7.5e-5  # F5-TTS base learning rate (vox used 2e-4 for its smaller model)
    betas: Sequence[float] = (0.9, 0.98)  # vox design; the Transformer's (Vaswani et al. 2017)
    weight_decay: float = 0.01  # AdamW's default, as in F5-TTS and vox; matrices only
    grad_clip: float | None = 1.0  # max global L2 norm (F5-TTS max_grad_norm = 1.0); None = off
    grad_accum_steps: int = attrs.field(default=1, validator=_positive)
    ema_decay: float = attrs.field(default=0.9999, validator=_probability)  # F5-TTS EMA beta
    ema_warmup: bool = True  # decay min(ema_decay, (1+u)/(10+u)), TF ExponentialMovingAverage
    # CFG dropout probabilities per item: F5-TTS drops the audio prompt with 0.3 and text and
    # prompt together with 0.2; text alone is not dropped there.
    cfg_drop: Mapping[str, float] = attrs.Factory(lambda: {"text_p": 0.0, "prompt_p": 0.3, "both_p": 0.2})
    nonfinite: str = "stop"  # "stop" | "skip": a non-finite loss or gradient stops the run, or skips the update
    max_consecutive_skips: int = attrs.field(default=3, validator=_positive)  # "skip": stop after this many in a row

    # ---- evaluation, saving, logging (may change on resume) ----
    eval_every: int | None = attrs.field(default=1000, validator=_positive)  # optimizer updates; None = never
    eval_batches: int = attrs.field(default=8, validator=_positive)  # fixed validation batches per pass
    save_every: int = attrs.field(default=1000, validator=_positive)  # optimizer updates
    keep_last: int = attrs.field(default=3, validator=_positive)  # checkpoints kept (best/ is extra)
    log_every: int = attrs.field(default=10, validator=_positive)  # optimizer updates per train record
    # The intelligibility probe (flowkit.train.probe): None = off; @Probe() synthesises fixed
    # sentences every Probe.every steps and logs their WER/CER. Costs seconds per probe on a CPU.
    probe: Any = None

    # ---- debugging ----
    # Reuse the first batch (same spans and dropout) at every step; t and noise still vary.
    overfit_one_batch: bool = False

    # ---- performance (docs/performance.md; may change on resume) ----
    # Build the next steps' micro-batches in a background thread while this one trains
    # (same batches and draws; resume stays bit-identical), up to prefetch_steps steps ahead
    # (more absorbs slower builds, at the memory of that many steps' batches).
    prefetch: bool = True
    prefetch_steps: int = attrs.field(default=2, validator=_positive)
    # Threads that assemble those batches (reads, collation) at once, up to
    # max(prefetch_steps, batch_workers) steps ahead; the draws are made in step order by one
    # thread, so any number gives the same batches. None = the cores this process may use
    # less one (the training thread's), at least 1 and at most 8
    # (flowkit.batching.prefetch.default_batch_workers); 1 = one build thread.
    batch_workers: int | None = attrs.field(default=None, validator=_positive)
    # Python's cyclic garbage collector off during the loop, run every gc_every steps instead
    # (the young generations; a full collection every 10th time) in the training thread, so a
    # collection never fires inside a batch build while the training thread waits for the GIL
    # (flowkit.train.collection). None = Python's automatic collection.
    gc_every: int | None = attrs.field(default=50, validator=_positive)
    # Keep freed host memory in the process (glibc's mmap and trim thresholds, one arena) and
    # numpy's arrays off transparent huge pages, set at launch before any thread allocates,
    # so batch builds reuse freed memory instead of faulting fresh pages in
    # (flowkit.batching.host_memory); False: the C library's defaults. Host-side only: the
    # same bits either way.
    keep_freed_memory: bool = True
    # On a CPU run, swap the model's linear, dropout and grouped-convolution layers for CPU
    # layers with kernels chosen for this machine at start (flowkit.converters.cpu), the
    # choice recorded in every checkpoint and replayed on resume; False: torch's own layers.
    # Fixed for the run: the two differ in the last bits, so a resume refuses a change.
    cpu_kernels: bool = True
    # Recompute each DiT block's activations in the backward pass (flowkit.converters.checkpointing):
    # about a third more compute for a fraction of the activation memory; the same loss and
    # gradients, so it may change on resume.
    activation_checkpointing: bool = False
    # torch.compile the DiT's feed-forward and modulation (off: compilation takes minutes for
    # a large model; it needs a C++ compiler on the CPU and Triton on CUDA).
    compile: bool = False
    # TF32 matrix products on CUDA (Ampere and newer) for the float32 parts of a step.
    tf32: bool = True
    # The device's peak TFLOP/s for the mfu field; None = the bf16 table of flowkit.model.flops.
    peak_tflops: float | None = None
    # Estimate the peak memory of the costliest batch before step 0 and refuse a run that
    # cannot fit; then run forward + backward on that batch (flowkit.train.memory).
    memory_check: bool = True
    # Memory (GB) the check compares with; None = the device's free memory (CPU: MemAvailable).
    max_memory_gb: float | None = None

    # ---- torch.distributed (docs/distributed.md; ignored by a single process) ----
    # Seconds any collective may wait for the other ranks before the run fails naming the
    # rank; rank 0's evaluation pass and checkpoint save must fit inside it. May change on resume.
    dist_timeout_s: float = 600.0
    # DDP's find_unused_parameters: only for a model that leaves parameters out of some
    # forward passes (the built-in DiT does not; True costs a graph walk per step).
    ddp_find_unused_parameters: bool = False

    def build_workers(self) -> int:
        """``batch_workers``, or the default for this machine when it is None."""
        return self.batch_workers if self.batch_workers is not None else default_batch_workers()

    def __attrs_post_init__(self) -> None:
        for slot, kind in SLOT_KINDS.items():
            value = getattr(self, slot)
            if slot in ("losses", "loggers"):
                for i, item in enumerate(value):
                    registry.check_kind(item, kind, where=f"Trainer.{slot}[{i}]")
            else:
                registry.check_kind(value, kind, where=f"Trainer.{slot}")
        if self.adapter is not None:
            registry.check_kind(self.adapter, "adapter", where="Trainer.adapter")
        if self.nonfinite not in NONFINITE_POLICIES:
            raise ConfigError(
                f"Trainer.nonfinite = {self.nonfinite!r} is not one of {', '.join(map(repr, NONFINITE_POLICIES))}"
            )
        if not (self.lr > 0 and math.isfinite(self.lr)):  # also NaN and 1e999 (read as inf)
            raise ConfigError(f"Trainer.lr = {self.lr!r} must be > 0 and finite (F5-TTS uses 7.5e-5)")

        def number(v: object) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        if len(self.betas) != 2 or not all(number(b) and 0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"Trainer.betas = {tuple(self.betas)!r} must be two values in [0, 1), e.g. (0.9, 0.98)")
        if not (self.weight_decay >= 0 and math.isfinite(self.weight_decay)):
            raise ConfigError(f"Trainer.weight_decay = {self.weight_decay!r} must be >= 0 "
                              "(AdamW's default 0.01; 0 = off)")
        for i, loss in enumerate(self.losses):
            weight = getattr(loss, "weight", 1.0)
            if not weight > 0:  # also NaN
                name = next((c.gin_name for c in registry.components("loss") if type(loss) is c.obj),
                            type(loss).__name__)
                raise ConfigError(
                    f"Trainer.losses[{i}] = @{name}() has weight {weight!r}; a loss weight must be > 0 "
                    f"(fix {name}.weight, or drop the loss from Trainer.losses to turn it off)"
                )
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ConfigError(f"Trainer.grad_clip = {self.grad_clip!r} must be > 0, or None to disable clipping")
        unknown = set(self.cfg_drop) - {"text_p", "prompt_p", "both_p"}
        if unknown:
            raise ConfigError(
                f"Trainer.cfg_drop has unknown key(s) {sorted(unknown)}; the keys are text_p, prompt_p, both_p"
            )
        for key, p in self.cfg_drop.items():
            if not (number(p) and 0.0 <= p <= 1.0):
                raise ConfigError(f"Trainer.cfg_drop = {dict(self.cfg_drop)!r}: {key} = {p!r} must be a probability "
                                  "in [0, 1], e.g. {'text_p': 0.0, 'prompt_p': 0.3, 'both_p': 0.2}")
        if not self.losses:
            raise ConfigError("Trainer.losses is empty; give at least [@loss.masked_mse()]")
        if self.dist_timeout_s <= 0:
            raise ConfigError(f"Trainer.dist_timeout_s = {self.dist_timeout_s!r} must be > 0 seconds, e.g. 600")
