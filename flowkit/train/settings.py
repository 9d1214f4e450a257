"""The contract of a training run: one gin-configurable settings object, ``Trainer``.

Every component of a run is a field here, named from gin (``Trainer.schedule =
@schedule.cosine_vpred()``); everything else is a plain value with its default and where
that default comes from. `Trainer` only holds and checks values: the loop lives in
`flowkit.train.loop`.

Defaults follow F5-TTS (Chen et al. 2024) for the optimisation of a flow-matching TTS
DiT, except where a note says otherwise; ``gin/base.gin`` restates them for reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import gin

from flowkit import registry
from flowkit.errors import ConfigError

__all__ = ["NONFINITE_POLICIES", "Trainer"]

#: What a non-finite loss or gradient does: stop the run, or skip that update.
NONFINITE_POLICIES = ("stop", "skip")


def _component(kind: str, name: str, **kwargs: Any) -> Any:
    """A default that builds ``<kind>.<name>`` at construction time (gin bindings apply)."""

    def build() -> Any:
        registry.load_plugins()
        return registry.build(kind, name, **kwargs)

    return attrs.Factory(build)


def _components(*names: tuple[str, str]) -> Any:
    def build() -> list[Any]:
        registry.load_plugins()
        return [registry.build(kind, name) for kind, name in names]

    return attrs.Factory(build)


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
    model: Any = _component("model", "dit")
    schedule: Any = _component("schedule", "flow_matching")
    # F5-TTS draws t uniformly during training (its sway sampling is inference-only).
    t_sampler: Any = _component("t_sampler", "uniform")
    losses: Sequence[Any] = _components(("loss", "masked_mse"))
    batch_sampler: Any = _component("batch_sampler", "frame_budget")
    pairing: Any = _component("pairing", "in_clip")
    lr_schedule: Any = _component("lr_schedule", "warmup_cosine")
    # jsonl is always added (the resume check and reports read metrics.jsonl).
    loggers: Sequence[Any] = _components(("logger", "console"))
    solver: Any = _component("solver", "euler")  # for synthesis from this run's checkpoints
    # Decodes this run's report samples; None: vocoder.griffin_lim (weight-free) when it inverts
    # the stores' encoder. A vocoder that cannot invert the stores' latents stops the start.
    vocoder: Any = None
    text: Any = _component("text", "chars")

    # ---- data ----
    # Latent stores (zarr); empty = the bundled demo store (flowkit.data.demo.demo_store_path).
    data: Sequence[str] = ()
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
    # Build the next step's micro-batches in a background thread while this one trains
    # (same batches and draws; resume stays bit-identical).
    prefetch: bool = True
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

    def __attrs_post_init__(self) -> None:
        if self.nonfinite not in NONFINITE_POLICIES:
            raise ConfigError(
                f"Trainer.nonfinite = {self.nonfinite!r} is not one of {', '.join(map(repr, NONFINITE_POLICIES))}"
            )
        if self.lr <= 0:
            raise ConfigError(f"Trainer.lr = {self.lr!r} must be > 0 (F5-TTS uses 7.5e-5)")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"Trainer.betas = {tuple(self.betas)!r} must be two values in [0, 1), e.g. (0.9, 0.98)")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ConfigError(f"Trainer.grad_clip = {self.grad_clip!r} must be > 0, or None to disable clipping")
        unknown = set(self.cfg_drop) - {"text_p", "prompt_p", "both_p"}
        if unknown:
            raise ConfigError(
                f"Trainer.cfg_drop has unknown key(s) {sorted(unknown)}; the keys are text_p, prompt_p, both_p"
            )
        if not self.losses:
            raise ConfigError("Trainer.losses is empty; give at least [@loss.masked_mse()]")
        if self.dist_timeout_s <= 0:
            raise ConfigError(f"Trainer.dist_timeout_s = {self.dist_timeout_s!r} must be > 0 seconds, e.g. 600")
