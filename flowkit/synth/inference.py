"""A checkpoint made ready for synthesis: model with EMA (or raw) weights, and what it needs.

Shape legend: n frames, d latent channels.

Everything comes from the checkpoint's ``meta.json`` (model config, vocab, languages,
latent stats, the run's config text, the encoder record a vocoder checks and reads, the
run's ``Trainer.vocoder``, and under ``synthesis`` the run's schedule, solver and text
front end, `flowkit.checkpoints.synthesis_meta`); checkpoints written before the encoder record
travelled in meta read it from the store's attributes, else fall back to the log_mel
defaults and say so in ``encoder_from``. No config is parsed and no `Trainer` is built,
so a run synthesises where its training-only components (a wandb logger) are not
installed. Guidance works with any schedule (see `flowkit.synth.sample`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from flowkit.checkpoints import files as ckpt
from flowkit.checkpoints.synthesis_meta import SYNTHESIS_KEY
from flowkit.errors import CheckpointError, ConfigError

__all__ = ["InferenceModel", "generate", "load_inference_model", "resolve_checkpoint", "store_encoder",
           "store_encoder_found"]


@attrs.frozen
class InferenceModel:
    """A model ready to synthesise.

    Attributes:
        model: the `DiT` in eval mode on its device.
        weights: "EMA" or "raw" — which weights were loaded; step: the checkpoint's step.
        vocab: the run's `CharVocab`; languages: language codes (id = index + 1, 0 unknown).
        stats: `LatentStats` the latents are normalised by.
        encoder: the store's encoder record ``{"name", "params"}`` (for the vocoder).
        frame_rate: latent frames per second (Hz); sample_rate: audio samples per second.
        schedule, solver: the run's components; stores: the run's latent stores.
        checkpoint: the checkpoint directory.
        encoder_from: where ``encoder`` was read: "checkpoint", "store <path>", or
            "defaults" (an old checkpoint whose stores are gone: a guess).
        vocoder: the run's ``Trainer.vocoder`` record ``{"name", "params"}``, or None (default).
    """

    model: Any
    weights: str
    step: int
    vocab: Any
    languages: tuple[str, ...]
    stats: Any
    encoder: Mapping[str, Any]
    frame_rate: float
    sample_rate: int
    schedule: Any
    solver: Any
    stores: tuple[str, ...]
    checkpoint: Path
    encoder_from: str = "checkpoint"
    vocoder: Mapping[str, Any] | None = None

    @property
    def label(self) -> str:
        """Provenance of every output, e.g. ``EMA weights, step 240 (best/step-00000240)``."""
        return f"{self.weights} weights, step {self.step} ({self.checkpoint.parent.name}/{self.checkpoint.name})"

    def language_id(self, code: str) -> int:
        """Id of language ``code`` (0 when unknown or empty)."""
        return self.languages.index(code) + 1 if code in self.languages else 0


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint directory from a checkpoint or run directory (best, else newest valid).

    Raises:
        CheckpointError: the path does not exist, or holds no valid checkpoint.
    """
    root = Path(path)
    if not root.exists():
        raise CheckpointError(f"{root}: no such checkpoint or run directory (check the path; runs are under runs/ "
                              "by default)")
    if (root / "COMPLETE").is_file() or (root / "meta.json").is_file():
        return root
    for sub in ("best", "checkpoints"):
        found, _ = ckpt.find_latest(root / sub)
        if found is not None:
            return found
    raise CheckpointError(
        f"{root} holds no valid checkpoint (looked for best/ and checkpoints/step-*); give a run "
        "directory with a checkpoint or a checkpoint directory"
    )


def store_encoder_found(stores: Sequence[str]) -> tuple[dict[str, Any] | None, str | None]:
    """``(record, "store <path>")`` of the first readable store's encoder record, else ``(None, None)``.

    A zarr v3 group keeps its attributes in ``zarr.json``; reading that one file avoids
    opening the store (which may have moved since training).
    """
    for store in stores:
        try:
            meta = json.loads((Path(store) / "zarr.json").read_text(encoding="utf-8"))
            encoder = meta["attributes"]["encoder"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(encoder, dict) and "name" in encoder:
            return encoder, f"store {store}"
    return None, None


def store_encoder(stores: Sequence[str], fallback: Mapping[str, Any]) -> dict[str, Any]:
    """The encoder record in the first readable store's attributes, else ``fallback``."""
    found, _ = store_encoder_found(stores)
    return found if found is not None else dict(fallback)


def _run_components(meta: Mapping[str, Any]) -> tuple[Any, Any]:
    """``(schedule, solver)`` of a checkpoint, from ``meta["synthesis"]``
    (`flowkit.checkpoints.synthesis_meta`): no config is parsed and no `Trainer` is built, so
    nothing the run used only for training (a logger, say) has to be installed here.

    A checkpoint written before that record existed is read from its config text instead.

    Raises:
        ConfigError: a component the checkpoint names is not installed here, or (old
            checkpoints) its config no longer parses.
    """
    from flowkit import registry
    from flowkit.errors import RegistryError

    record = meta.get(SYNTHESIS_KEY)
    if not record:
        return _legacy_components(str(meta.get("config_text") or ""))
    try:
        return registry.from_record("schedule", record["schedule"]), registry.from_record("solver", record["solver"])
    except RegistryError as exc:
        raise ConfigError(f"the checkpoint needs a component not installed here: {exc}") from None


def _legacy_components(config_text: str) -> tuple[Any, Any]:
    """``(schedule, solver)`` from a run's config text (checkpoints without ``meta["synthesis"]``)."""
    import gin

    from flowkit import config as gin_config
    from flowkit import registry

    gin_config.parse([], [])  # loads plugins, clears gin's global state
    # The run's Trainer settings, by its declared name: synthesis reads what training wrote
    # without importing training (the configurable is a plugin like any component).
    trainer = registry.configurable("Trainer")
    try:
        gin.parse_config(config_text)
        settings = trainer()
    except Exception as exc:  # gin raises many types; the config came from a checkpoint
        raise ConfigError(f"the checkpoint's config does not parse here: {gin_config.one_line(exc)}") from exc
    finally:
        gin.clear_config()
    return settings.schedule, settings.solver


def load_inference_model(path: str | Path, *, weights: str = "ema", device: str | torch.device = "cpu") -> InferenceModel:
    """Load ``path`` (a checkpoint, or a run directory: its best, else newest checkpoint).

    Args:
        weights: "ema" (what inference should use) or "raw".

    Raises:
        CheckpointError: no valid checkpoint, or one whose meta lacks the model config.
        ConfigError: an unknown ``weights``, or a config that no longer parses.
    """
    from flowkit.data.stats import LatentStats
    from flowkit.model.dit import DiTConfig
    from flowkit.text.vocabs import vocab_from_state_dict

    if weights not in ("ema", "raw"):
        raise ConfigError(f"weights = {weights!r}; use 'ema' or 'raw'")
    loaded = ckpt.load_checkpoint(resolve_checkpoint(path), map_location="cpu")
    meta = loaded.meta
    missing = [k for k in ("model_config", "vocab", "latent_stats", "latent_dim") if k not in meta]
    if missing:
        raise CheckpointError(f"{loaded.path}: meta.json lacks {', '.join(missing)}; it was not written by flowkit train")
    vocab = vocab_from_state_dict(meta["vocab"])
    languages = tuple(meta.get("languages") or ())
    model = DiTConfig.from_dict(meta["model_config"]).build(int(meta["latent_dim"]), vocab.size, len(languages))
    state = dict(loaded.state["model"])
    if weights == "ema":
        # EMA shadows cover parameters and floating buffers; the rest stays as trained.
        state.update({k: v for k, v in loaded.state["ema"]["shadow"].items() if k in state})
    ckpt.load_strict(model, state, what="model", source=loaded.path)
    model.to(device).eval()
    frame_rate = float(meta.get("frame_rate") or 100.0)
    sample_rate = int(meta.get("sample_rate") or 16000)
    fallback = {
        "name": "log_mel",
        "params": {"sample_rate": sample_rate, "n_fft": 1024, "win_length": 640,
                   "hop_length": int(round(sample_rate / frame_rate)), "n_mels": int(meta["latent_dim"]),
                   "fmin": 0.0, "fmax": None, "log_floor": 1e-5},
    }
    stores = tuple(str(s) for s in meta.get("stores") or ())
    if isinstance(meta.get("encoder"), dict) and "name" in meta["encoder"]:
        encoder, encoder_from = dict(meta["encoder"]), "checkpoint"
    else:
        encoder, encoder_from = store_encoder_found(stores)
        if encoder is None:
            encoder, encoder_from = dict(fallback), "defaults"
    schedule, solver = _run_components(meta)
    return InferenceModel(
        model=model,
        weights="EMA" if weights == "ema" else "raw",
        step=loaded.step,
        vocab=vocab,
        languages=languages,
        stats=LatentStats.from_dict(meta["latent_stats"]),
        encoder=encoder,
        frame_rate=frame_rate,
        sample_rate=sample_rate,
        schedule=schedule,
        solver=solver,
        stores=stores,
        checkpoint=loaded.path,
        encoder_from=encoder_from,
        vocoder=meta.get("vocoder"),
    )


def generate(
    im: InferenceModel,
    utterances: Sequence[Any],
    *,
    steps: int = 32,
    cfg_strength: float = 2.0,
    seed: int = 0,
    on_step: Any = None,
) -> list[np.ndarray]:
    """Generated target spans, de-normalised: one ``[n_i d]`` float32 array per utterance.

    ``utterances`` are `flowkit.synth.sample.Utterance` s; ``steps`` ODE steps of the run's
    solver, CFG strength ``cfg_strength``, noise from ``seed`` (the same seed, the same output);
    ``on_step(t)`` is called at every evaluation of the velocity field (`flowkit.synth.sample.synthesize`).

    Raises:
        ConfigError: as `flowkit.synth.sample.inference_conditions` / `synthesize` raise.
    """
    from flowkit.synth.sample import inference_conditions, synthesize, target_spans

    # Units are the words between spaces; a vocabulary that never saw a space encodes it as
    # the unknown id 1, which must not split units.
    space = [i for i in im.vocab.encode(" ") if i > 1]
    cond = inference_conditions(im.model, utterances, separator_ids=space)
    generator = torch.Generator().manual_seed(seed)
    latents = synthesize(
        im.model, cond, schedule=im.schedule, solver=im.solver, steps=steps, cfg_strength=cfg_strength, generator=generator,
        on_step=on_step,
    )
    spans = target_spans(latents, cond)
    return [np.asarray(im.stats.denormalize(s.float().cpu().numpy()), dtype=np.float32) for s in spans]
