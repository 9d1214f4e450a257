"""The small interfaces each kind of component meets.

Each kind is declared with its protocol in flowkit's pyproject (entry points
``flowkit.kinds``; a plugin package may declare a kind of its own the same way); the
first line of a protocol's docstring is the kind's description in ``flowkit plugins``.
The slots of `flowkit.train.settings.Trainer` are typed with these protocols and a value
of the wrong kind is refused when the settings are built (`flowkit.registry.check_kind`).

Shape legend used across flowkit:
    b  batch items            n  latent frames            d  latent channels
    nt characters (text)      u  units (words)

Conventions: the flow time t runs from 0 (noise ``x0``) to 1 (data ``x1``); t is drawn on
the CPU from an explicit ``torch.Generator`` so a run does not depend on its device.
Frames are latent frames at the store's frame rate (Hz); durations are in frames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import torch


@runtime_checkable
class Schedule(Protocol):
    """Noise schedule: noisy sample, training target, and dx/dt from the output.

    A probability path between noise x0 (t=0) and data x1 (t=1).
    """

    def sample(
        self, x0: torch.Tensor, x1: torch.Tensor, t: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_t [b n d], target [b n d])`` for ``t [b]``: the network learns ``target``."""
        ...

    def velocity(self, x_t: torch.Tensor, t: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        """dx/dt ``[b n d]`` at ``(x_t, t)`` from the network ``output`` (for ODE solvers)."""
        ...


@runtime_checkable
class TSampler(Protocol):
    """Draws the flow time t in [0, 1] for each training item."""

    def __call__(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """``t [n]`` flow times in [0, 1], float32 on the CPU, drawn from ``generator``."""
        ...


@runtime_checkable
class Solver(Protocol):
    """ODE solver from noise (t=0) to data (t=1) along the model's velocity field."""

    def __call__(
        self,
        field: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        x0: torch.Tensor,
        steps: int,
    ) -> torch.Tensor:
        """Integrate dx/dt = ``field(x [b n d], t [b])`` from t=0 (``x0 [b n d]``) to t=1 in
        ``steps`` steps; returns ``x1 [b n d]``."""
        ...


@runtime_checkable
class BatchSampler(Protocol):
    """Groups segments into batches; deterministic from (seed, epoch) and resumable."""

    def epoch_batches(
        self, lengths: np.ndarray, seed: int, epoch: int, *, rank: int = 0, world_size: int = 1
    ) -> Any:
        """This rank's batches of epoch ``epoch`` (an `flowkit.batching.samplers.EpochPlan`)."""
        ...


@runtime_checkable
class Logger(Protocol):
    """Receives metrics records (console, jsonl, tensorboard, wandb, ...); only rank 0 logs."""

    def open(self, run_dir: Any, *, resumed: bool, total_steps: int, start_step: int) -> None:
        """Start logging into ``run_dir`` (a `pathlib.Path`); ``resumed`` runs continue at ``start_step``."""
        ...

    def log(self, record: Mapping[str, Any]) -> None:
        """One record: ``{"kind": "train" | "eval" | "event", "step": int, ...}``."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Encoder(Protocol):
    """Audio -> latent frames.

    ``params()`` is recorded in the store's attributes.
    """

    sample_rate: int

    @property
    def frame_rate(self) -> float: ...

    @property
    def latent_dim(self) -> int: ...

    def encode(self, audio: np.ndarray) -> np.ndarray:
        """``audio [samples]`` float32 mono at `sample_rate` -> latents ``[n d]`` float32."""
        ...

    def params(self) -> dict[str, Any]: ...


@runtime_checkable
class Vocoder(Protocol):
    """Latent frames -> audio, and says which latents it can invert (see
    `flowkit.data.encoder_records.check_vocoder`)."""

    def __call__(self, latents: np.ndarray, encoder: Mapping[str, Any]) -> tuple[np.ndarray, int]:
        """Latents ``[n d]`` (de-normalised) -> ``(audio [samples], Hz)`` at the vocoder's own
        level; ``encoder`` is the latents' encoder record ``{"name": ..., "params": {...}}``."""
        ...

    def accepts(self) -> Sequence[Any]:
        """The `flowkit.data.encoder_records.EncoderSpec` s of the latents it inverts."""
        ...

    @property
    def label(self) -> str:
        """How sample cards and the synthesize line name it, e.g. ``vocoder.griffin_lim (32 iterations)``."""
        ...


@runtime_checkable
class TextFrontEnd(Protocol):
    """Text front end: builds the run's vocabulary (string -> token ids).

    The vocabulary's state travels with the checkpoint.
    """

    def build_vocab(self, texts: Iterable[str]) -> Any:
        """The vocabulary of ``texts`` (the training split): an object with ``encode(text) ->
        ids [nt]`` (0 is padding), ``size`` and ``state_dict()``."""
        ...


@runtime_checkable
class Aligner(Protocol):
    """Estimates unit (word) timings when no forced alignment exists."""

    def align(
        self, text: str, audio: np.ndarray, sample_rate: int, frame_rate: float, n_frames: int | None = None
    ) -> Sequence[tuple[int, int, int, int]]:
        """Unit timings ``[u]`` of ``(char_start, char_end, frame_start, frame_end)`` (ends exclusive)
        for one clip: ``audio [samples]`` at ``sample_rate`` Hz, frames at ``frame_rate`` Hz,
        ``n_frames`` the encoder's frame count. Empty when no honest timing exists."""
        ...


@runtime_checkable
class LRSchedule(Protocol):
    """Learning-rate multiplier per optimizer update."""

    def __call__(self, update: int, total_updates: int) -> float:
        """Learning-rate multiplier at optimizer update ``update`` (0-based)."""
        ...


@runtime_checkable
class Pairing(Protocol):
    """Chooses each item's prompt and target span (see flowkit.batching.pairing)."""

    @property
    def draws_per_item(self) -> int:
        """Uniform draws consumed per item, fixed whatever happens (reproducible batches)."""
        ...

    def budget_lengths(self, segments: Sequence[Any]) -> np.ndarray:
        """Frames each item occupies in the batch budget, reserved prompt frames included."""
        ...

    def plan(self, batch_indices: Sequence[int], segments: Sequence[Any], rng: np.random.Generator) -> list[Any]:
        """An `flowkit.batching.pairing.ItemPlan` per item: prompt and target span."""
        ...

    def cross_pass(self) -> Pairing | None:
        """The pairing of the cross-segment validation pass (every item asked for a prompt
        from another segment of its speaker), or None when this pairing never pairs across
        segments; a run logs ``cross_frac`` and runs that pass only when it is not None."""
        ...


@runtime_checkable
class Loss(Protocol):
    """A loss term with its normalising unit (frames or characters)."""

    weight: float

    def __call__(self, inputs: Any) -> Any:
        """The `flowkit.losses.LossTerm` of one micro-batch (`flowkit.losses.LossInputs`),
        or None when the term is disabled."""
        ...


@runtime_checkable
class Model(Protocol):
    """The network that predicts the flow target (its config; `build` makes the module)."""

    text_path: str

    def build(self, latent_dim: int, vocab_size: int, n_languages: int) -> torch.nn.Module:
        """The network for latents of ``latent_dim`` channels, ``vocab_size`` tokens and
        ``n_languages`` languages, with freshly initialised weights."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """The config as plain values (recorded in every checkpoint)."""
        ...


@runtime_checkable
class Adapter(Protocol):
    """Parameter-efficient fine-tuning: adapter weights on a frozen base model (``Trainer.adapter``)."""

    def apply(self, model: torch.nn.Module, *, seed: int, new_rows: tuple[int, int] | None = None) -> torch.nn.Module:
        """``model`` (the base's weights loaded) with adapters inserted and every base weight
        frozen; text-embedding rows ``new_rows`` (``[first, end)``) stay trainable. Its
        ``state_dict`` holds the trainable weights only. Initialised from ``seed``; equal to
        the base's forward until trained."""
        ...

    def record(self) -> dict[str, Any]:
        """The adapter's settings as plain values (recorded in every adapter checkpoint)."""
        ...


@runtime_checkable
class ASR(Protocol):
    """Speech recogniser: audio -> text, to score what a model says (WER, CER)."""

    def transcribe(self, audio: np.ndarray, sample_rate: int, language: str = "en") -> str:
        """The words heard in ``audio [samples]`` at ``sample_rate`` Hz."""
        ...

    def describe(self) -> dict[str, Any]:
        """Which judge this is: ``{"name": "asr.<name>", "model": ..., "version": ...}`` (the
        package version), recorded beside every score it gives."""
        ...


@runtime_checkable
class SpeakerJudge(Protocol):
    """Speaker similarity: embeds a voice and compares two clips (cosine of embeddings)."""

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """``audio [samples]`` float at ``sample_rate`` Hz -> an L2-normalised embedding ``[d]``."""
        ...

    def similarity(self, a: np.ndarray, sr_a: int, b: np.ndarray, sr_b: int) -> float:
        """Cosine similarity in [-1, 1] of the embeddings of clips ``a`` and ``b``."""
        ...

    def describe(self) -> dict[str, Any]:
        """``{"name": "speaker.<name>", "model": ..., "version": ...}``."""
        ...


@runtime_checkable
class QualityJudge(Protocol):
    """Speech quality without a reference (a predicted MOS): OVRL, SIG, BAK."""

    def score(self, audio: np.ndarray, sample_rate: int) -> dict[str, float]:
        """``{"ovrl", "sig", "bak"}`` of ``audio [samples]`` float at ``sample_rate`` Hz, each a
        predicted mean opinion score on the 1-5 scale."""
        ...

    def describe(self) -> dict[str, Any]:
        """``{"name": "quality.<name>", "model": ..., "version": ...}``."""
        ...


@runtime_checkable
class CurationCriterion(Protocol):
    """Curation criterion: measures each clip of a corpus and drops the outliers (flowkit curate).

    ``measure`` runs per clip in a worker process and returns JSON values (floats, lists);
    ``decide`` sees every clip's measures at once (per-speaker statistics need them all)
    and returns, per clip, the value plotted on the report page and a reason to drop it
    or None. See `flowkit.curation.criteria`.
    """

    def measure(self, clip: Any) -> dict[str, Any]:
        """Measures of one `flowkit.curation.clips.ClipAudio` (JSON-serialisable)."""
        ...

    def decide(self, clips: Sequence[Any], measures: Sequence[Mapping[str, Any]]) -> Any:
        """A `flowkit.curation.criteria.base.Decision` for ``clips`` (`ClipInfo`) and their
        measures, in the same order."""
        ...

    def describe(self) -> dict[str, Any]:
        """``{"name": "criterion.<name>", ...}``: the criterion, its settings and judge."""
        ...
