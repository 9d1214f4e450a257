"""What may differ between a checkpoint and the run that continues from it.

Resume (same run, continued): the config may change only in how the run is watched —
logging, evaluation, saving — and by raising the step count (`RESUME_ALLOW`); the data
must have the same fingerprint; the checkpoint must not lie past the configured steps.

init-from (a new run from another run's weights): the model configs must be equal except
the steps `INIT_FROM_ALLOWED`: ``dur_cond: "none" -> "emotion"``, whose new
zero-initialised FiLM parameters (`flowkit.model.dit.DUR_FILM_PREFIX`) keep their
initialisation, and ``conditions: False -> True`` (an imported F5-TTS model gaining
flowkit's global conditions, `flowkit.model.dit.GLOBALS_PREFIX`, zero-initialised in the
F5 archs so they start at exactly no effect). ``dropout`` may differ freely: it is a
training setting, not part of the weights (`flowkit.train.run` takes the rest of the
network's shape from the parent). The data must be latents of the parent's encoder
(`check_init_from_data`).

Every refusal is a `ResumeError` of one line that says what differs and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowkit.config import config_diff
from flowkit.errors import ResumeError

__all__ = [
    "INIT_FROM_ALLOWED",
    "RESUME_ALLOW",
    "check_data",
    "check_init_from_data",
    "check_init_from_model",
    "check_resume_config",
    "check_steps",
]

#: Bindings a resume may change (fnmatch patterns over ``selector.parameter``).
RESUME_ALLOW: tuple[str, ...] = (
    "Trainer.steps",  # raising only: see check_steps
    "Trainer.log_every",
    "Trainer.eval_every",
    "Trainer.eval_batches",
    "Trainer.save_every",
    "Trainer.keep_last",
    "Trainer.dist_timeout_s",  # how long ranks wait for each other, not what they compute
    # how fast, not what: the same batches, draws and (on one device type) the same numbers
    "Trainer.prefetch",
    "Trainer.prefetch_steps",
    "Trainer.batch_workers",
    "Trainer.gc_every",
    "Trainer.activation_checkpointing",  # recomputes the same activations: the same numbers
    "Trainer.peak_tflops",
    "Trainer.memory_check",
    "Trainer.max_memory_gb",
    "Trainer.loggers",
    "Trainer.vocoder",  # decodes samples; training never calls it
    "vocoder.*",
    "*/vocoder.*",
    "Trainer.probe",  # the probe watches the run; it never touches the training streams
    "Probe.*",
    "asr.*",
    "logger.*",
    "*/logger.*",
)

#: The model-config change init-from accepts: field -> (parent value, child value).
INIT_FROM_ALLOWED: dict[str, tuple[Any, Any]] = {
    "dur_cond": ("none", "emotion"),
    # an imported F5-TTS model gains flowkit's global conditions, zero-initialised
    "conditions": (False, True),
}

#: Model fields init-from accepts any change of: training settings that no weight depends on.
INIT_FROM_FREE: tuple[str, ...] = ("dropout",)

def check_resume_config(saved_text: str, current_text: str, *, run_dir: str) -> dict[str, tuple[Any, Any]]:
    """The allowed differences between the checkpoint's config and the current one.

    Raises:
        ResumeError: a difference outside `RESUME_ALLOW`, or steps lowered.
    """
    diff = config_diff(saved_text, current_text, allow=RESUME_ALLOW)
    if not diff.ok:
        raise ResumeError(
            f"the config of {run_dir} changed since its checkpoint ({diff.describe()}); only "
            "logging, evaluation, saving and raising Trainer.steps may change on resume — undo "
            "the change, or start a new run (flowkit init-from CHECKPOINT CONFIG to keep the weights)"
        )
    return dict(diff.allowed)


def check_steps(checkpoint_step: int, steps: int, *, checkpoint: str) -> None:
    """Raises ResumeError when the checkpoint is already past the configured steps."""
    if checkpoint_step > steps:
        raise ResumeError(
            f"checkpoint {checkpoint} is at step {checkpoint_step}, past Trainer.steps = {steps}; "
            f"resume with --steps {checkpoint_step} or more"
        )


def check_data(saved: str | None, current: str, *, run_dir: str) -> None:
    """Raises ResumeError when the training data's fingerprint changed."""
    if saved != current:
        raise ResumeError(
            f"the training data of {run_dir} changed (fingerprint {saved} -> {current}); resume "
            "with the stores the run started on, or start a new run from its weights with "
            "flowkit init-from"
        )


def check_init_from_model(diff: Mapping[str, tuple[Any, Any]], *, parent_path: str) -> dict[str, tuple[Any, Any]]:
    """Judge a model-config difference (`flowkit.model.dit.model_diff(parent, child)`).

    Returns:
        The accepted difference (empty, or `INIT_FROM_ALLOWED`).

    Raises:
        ResumeError: any other difference, naming the fields.
    """
    refused = {k: tuple(v) for k, v in diff.items() if INIT_FROM_ALLOWED.get(k) != tuple(v) and k not in INIT_FROM_FREE}
    if refused:
        text = "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in refused.items())
        raise ResumeError(
            f"the model config differs from the parent {parent_path} ({text}); init-from needs the "
            "same model, except model.dit.dur_cond 'none' -> 'emotion', model.dit.conditions False -> True "
            "and any model.dit.dropout — use the parent's model settings"
        )
    return {k: tuple(v) for k, v in diff.items()}


def check_init_from_data(parent_meta: Mapping[str, Any], encoder: Mapping[str, Any] | None, latent_dim: int, *,
                         parent_path: str, stores: str) -> None:
    """Refuse training data of another encoder (or width) than the parent's: its weights
    and latent stats read one encoder's latents (an F5-TTS import reads vocos_mel).

    Args:
        parent_meta: the parent checkpoint's ``meta.json`` (``encoder``, ``latent_dim``).
        encoder, latent_dim: the encoder record and latent width of the new run's stores.
        parent_path, stores: for the message.

    Raises:
        ResumeError: naming both encoders and the ``prepare --encoder`` that fits the parent.
    """
    from flowkit.data.encoder_records import EncoderSpec, describe_record, record_params

    theirs = parent_meta.get("encoder")
    their_dim = parent_meta.get("latent_dim")
    same_dim = their_dim is None or int(their_dim) == int(latent_dim)
    if not isinstance(theirs, Mapping) or not isinstance(encoder, Mapping):
        same_encoder = True  # a record missing on one side (an old store or run): the width decides
    else:
        same_encoder = EncoderSpec(str(theirs.get("name")), record_params(theirs)).mismatch(encoder) is None
    if same_dim and same_encoder:
        return

    def text(record: Mapping[str, Any] | None, dim: Any) -> str:
        name = describe_record(record) if isinstance(record, Mapping) else "an unrecorded encoder"
        return f"{name}, {dim} channels"

    name = theirs.get("name") if isinstance(theirs, Mapping) else None
    fix = f"prepare the data with --encoder {name} (and the parent's settings)" if name else \
        "prepare the data with the parent's encoder"
    raise ResumeError(
        f"init-from: the parent {parent_path} was trained on {text(theirs, their_dim)} latents; {stores} hold "
        f"{text(encoder, latent_dim)}: its weights and latent stats read the parent's encoder only — {fix}, "
        "or train from scratch without --init-from"
    )
