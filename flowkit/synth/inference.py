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

One place builds every part from the meta (`load_inference_model`: model, vocab, stats,
schedule, solver, encoder record and, with ``audio=True``, the vocoder, checked against
that record) and hands them down: `validation_picks` reads the run's own validation
sentences with their prompts, `generate` samples, `listen` turns latents into audio at the
vocoder's level. A report's samples (`flowkit.report.samples`) and ``flowkit synthesize``
are these calls in a row.
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
from flowkit.checkpoints.files import resolve_checkpoint
from flowkit.checkpoints.synthesis_meta import SYNTHESIS_KEY
from flowkit.data.labels import language_id
from flowkit.errors import CheckpointError, ConfigError, DataError

__all__ = ["MAX_PROMPT_FRAMES", "InferenceModel", "Pick", "generate", "listen", "load_inference_model",
           "resolve_checkpoint", "store_encoder", "store_encoder_found", "validation_picks"]

MAX_PROMPT_FRAMES = 300  # 3 s at 100 Hz: enough to carry the voice, cheap on a CPU


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
        separator_ids: the ids of a space, which separate the units (words) of a text.
        audio_vocoder: the vocoder component that makes this model's audio (``audio=True``
            of `load_inference_model`), checked against ``encoder``; else None;
            audio_label: its name and settings for a caption (`vocoder_label`), else "".
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
    separator_ids: tuple[int, ...] = ()
    audio_vocoder: Any = None
    audio_label: str = ""

    @property
    def label(self) -> str:
        """Provenance of every output, e.g. ``EMA weights, step 240 (best/step-00000240)``."""
        return f"{self.weights} weights, step {self.step} ({self.checkpoint.parent.name}/{self.checkpoint.name})"

    def language_id(self, code: str) -> int:
        """Id of language ``code`` (0 when unknown or empty)."""
        return language_id(self.languages, code)


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


def _legacy_components(config_text: str) -> tuple[Any, Any]:
    """``(schedule, solver)`` from a run's config text (checkpoints without ``meta["synthesis"]``)."""
    import gin

    from flowkit import config as gin_config
    from flowkit import registry

    gin_config.parse([], [])  # loads plugins, clears gin's global state
    # The run's Trainer settings, by its declared name: synthesis reads what training wrote
    # without importing training (the configurable is a plugin like any component).
    trainer = registry.configurable("Trainer")
    from flowkit.config.trust import check_statements

    check_statements(config_text, "the checkpoint's config")  # a config is data: no import of undeclared code
    try:
        gin.parse_config(config_text)
        settings = trainer()
    except Exception as exc:  # gin raises many types; the config came from a checkpoint
        raise ConfigError(f"the checkpoint's config does not parse here: {gin_config.one_line(exc)}") from exc
    finally:
        gin.clear_config()
    return settings.schedule, settings.solver


def load_inference_model(path: str | Path, *, weights: str = "ema", device: str | torch.device = "cpu",
                         audio: bool = False, vocoder: Any = None) -> InferenceModel:
    """Load ``path`` (a checkpoint, or a run directory: its best, else newest checkpoint).

    Args:
        weights: "ema" (what inference should use) or "raw".
        audio: also choose the vocoder (``audio_vocoder``): ``vocoder`` when given, else the
            run's ``Trainer.vocoder``, else ``vocoder.griffin_lim``; checked against the
            checkpoint's encoder record.

    Raises:
        CheckpointError: no valid checkpoint, or one whose meta lacks the model config.
        ConfigError: an unknown ``weights``, a component not installed here, a config that no
            longer parses (old checkpoints), or (``audio``) a vocoder that cannot invert
            these latents.
    """
    from flowkit import registry
    from flowkit.data.stats import LatentStats
    from flowkit.errors import RegistryError
    from flowkit.model.dit import DiTConfig
    from flowkit.synth.vocoders import checked_vocoder
    from flowkit.text.vocabs import rebuild_vocab

    if weights not in ("ema", "raw"):
        raise ConfigError(f"weights = {weights!r}; use 'ema' or 'raw'")
    # The calls run down the layers (checkpoint files, text, then the vocoder, model, data,
    # checkpoint files, registry) so that the path reads top to bottom: tools/trace_path.py.
    loaded = ckpt.load_checkpoint(resolve_checkpoint(path), map_location="cpu")
    meta = loaded.meta
    missing = [k for k in ("model_config", "vocab", "latent_stats", "latent_dim") if k not in meta]
    if missing:
        raise CheckpointError(f"{loaded.path}: meta.json lacks {', '.join(missing)}; "
                              "it was not written by flowkit train")
    # the vocabulary, its size and the ids that separate units (words), in one call
    text = rebuild_vocab(meta["vocab"])
    vocab, n_ids, separators = text.vocab, text.size, text.separator_ids
    languages = tuple(meta.get("languages") or ())
    frame_rate = float(meta.get("frame_rate") or 100.0)
    sample_rate = int(meta.get("sample_rate") or 16000)
    stores = tuple(str(s) for s in meta.get("stores") or ())
    if isinstance(meta.get("encoder"), dict) and "name" in meta["encoder"]:
        encoder, encoder_from = dict(meta["encoder"]), "checkpoint"
    else:
        encoder, encoder_from = _encoder_fallback(stores, meta, frame_rate, sample_rate)
    chosen, audio_label = (checked_vocoder(encoder, source=f"the latents of {loaded.path}", given=vocoder,
                                           run_vocoder=meta.get("vocoder")) if audio else (None, ""))
    model = DiTConfig.from_dict(meta["model_config"]).build(int(meta["latent_dim"]), n_ids, len(languages))
    model.to(device).eval()
    stats = LatentStats.from_dict(meta["latent_stats"])
    state = dict(loaded.state["model"])
    if weights == "ema":
        # EMA shadows cover parameters and floating buffers; the rest stays as trained.
        state.update({k: v for k, v in loaded.state["ema"]["shadow"].items() if k in state})
    if meta.get("adapter"):  # adapter weights only (flowkit.adapters): merged onto the base its meta names
        from flowkit.adapters.files import load_base, merged_state

        state = merged_state(loaded, load_base(loaded), weights=weights)
    ckpt.load_strict(model, state, what="model", source=loaded.path)
    record = meta.get(SYNTHESIS_KEY)
    if record:
        # the run's components from their records (flowkit.checkpoints.synthesis_meta): no
        # config is parsed, so nothing the run used only for training must be installed here
        try:
            schedule = registry.from_record("schedule", record["schedule"])
            solver = registry.from_record("solver", record["solver"])
        except RegistryError as exc:
            raise ConfigError(f"the checkpoint needs a component not installed here: {exc}") from None
    else:  # written before that record existed: read from its config text
        schedule, solver = _legacy_components(str(meta.get("config_text") or ""))
    return InferenceModel(
        model=model,
        weights="EMA" if weights == "ema" else "raw",
        step=loaded.step,
        vocab=vocab,
        languages=languages,
        stats=stats,
        encoder=encoder,
        frame_rate=frame_rate,
        sample_rate=sample_rate,
        schedule=schedule,
        solver=solver,
        stores=stores,
        checkpoint=loaded.path,
        encoder_from=encoder_from,
        vocoder=meta.get("vocoder"),
        separator_ids=separators,
        audio_vocoder=chosen,
        audio_label=audio_label,
    )


def _encoder_fallback(stores: Sequence[str], meta: Mapping[str, Any], frame_rate: float,
                      sample_rate: int) -> tuple[dict[str, Any], str]:
    """The encoder record of a checkpoint written before it travelled in meta: the store's,
    else the log_mel defaults (a guess, said in ``encoder_from``)."""
    encoder, encoder_from = store_encoder_found(stores)
    if encoder is not None:
        return encoder, str(encoder_from)
    return {
        "name": "log_mel",
        "params": {"sample_rate": sample_rate, "n_fft": 1024, "win_length": 640,
                   "hop_length": int(round(sample_rate / frame_rate)), "n_mels": int(meta["latent_dim"]),
                   "fmin": 0.0, "fmax": None, "log_floor": 1e-5},
    }, "defaults"


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

    ``utterances`` are `flowkit.synth.sample.Utterance` s, or `Pick` s (their
    `Pick.utterance`); ``steps`` ODE steps of the run's
    solver, CFG strength ``cfg_strength``, noise from ``seed`` (the same seed, the same output);
    ``on_step(t)`` is called at every evaluation of the velocity field (`flowkit.synth.sample.synthesize`).

    Raises:
        ConfigError: as `flowkit.synth.sample.inference_conditions` / `synthesize` raise.
    """
    from flowkit.synth.sample import generated_latents, inference_conditions, synthesize

    utterances = [u.utterance(im.stats) if isinstance(u, Pick) else u for u in utterances]
    cond = inference_conditions(im.model, utterances, separator_ids=list(im.separator_ids))
    generator = torch.Generator().manual_seed(seed)
    latents = synthesize(
        im.model, cond, schedule=im.schedule, solver=im.solver, steps=steps, cfg_strength=cfg_strength,
        generator=generator, on_step=on_step,
    )
    return generated_latents(latents, cond, im.stats)


@attrs.frozen
class Pick:
    """One validation sentence to re-synthesise: its segment, its prompt, its truth.

    Attributes:
        segment: the target's `flowkit.data.dataset.SegmentInfo`; prompt: the prompt's, or
            None (the speaker has no other validation item: text only).
        truth: the target's stored latents ``[n d]`` (float32, de-normalised).
        text, prompt_text: token ids of the target's and the prompt's text (() without a prompt).
        prompt_latents: the prompt's stored latents ``[n d]`` (as read: de-normalised, the
            store's dtype), or None; `utterance` normalises them for the model.
        language: the target's language id (0 unknown).
    """

    segment: Any
    prompt: Any
    truth: np.ndarray
    text: Sequence[int]
    prompt_text: Sequence[int]
    prompt_latents: np.ndarray | None
    language: int

    def utterance(self, stats: Any) -> Any:
        """The `flowkit.synth.sample.Utterance` that re-synthesises it: its own text at its true
        length, the prompt (normalised with ``stats``, the model's `flowkit.data.stats.LatentStats`),
        and the labels it was recorded with."""
        from flowkit.synth.sample import Utterance, model_prompt, recorded_labels

        return Utterance(text=self.text, prompt=model_prompt(stats, self.prompt_latents), prompt_text=self.prompt_text,
                         target_frames=int(self.segment.n_frames), language=self.language,
                         **recorded_labels(self.segment))


def validation_picks(im: InferenceModel, n: int) -> list[Pick]:
    """Up to ``n`` validation items of ``im``'s stores, spread evenly (the same ones every time).

    Each one's prompt is a whole clip, so that its text is what its audio says (cutting a
    clip at `MAX_PROMPT_FRAMES` kept text the audio no longer had): the first other
    validation item of the speaker that fits, else the speaker's shortest other item.
    [] when the run has no validation data.

    Raises:
        DataError: the stores cannot be opened (moved or deleted since training).
    """
    from flowkit.data.dataset import LatentDataset
    from flowkit.text.vocabs import encode_text

    try:
        data = LatentDataset.open(list(im.stores), "val")
    except Exception as exc:  # a moved or deleted store: the caller decides what it costs
        raise DataError(f"the run's stores cannot be read ({type(exc).__name__}: {exc})") from exc
    try:
        total = len(data)
        chosen = list(range(total)) if n >= total else sorted(
            {int(round(i * (total - 1) / max(n - 1, 1))) for i in range(n)})
        segments = data.segments
        prompts: dict[int, int | None] = {}
        for i in chosen:
            same = [j for j, s in enumerate(segments) if j != i and s.speaker == segments[i].speaker]
            fits = [j for j in same if segments[j].n_frames <= MAX_PROMPT_FRAMES]
            prompts[i] = (fits or sorted(same, key=lambda j: (segments[j].n_frames, j)) or [None])[0]
        needed = sorted(set(chosen) | {j for j in prompts.values() if j is not None})
        latents = dict(zip(needed, data.read(needed), strict=True))
    finally:
        data.close()
    ids = {code: k + 1 for k, code in enumerate(im.languages)}  # as InferenceModel.language_id
    picks = []
    for i in chosen:
        seg, j = segments[i], prompts[i]
        prompt = None if j is None else segments[j]
        picks.append(Pick(
            segment=seg, prompt=prompt, truth=latents[i].astype(np.float32),
            prompt_latents=None if j is None else latents[j],
            text=encode_text(im.vocab, seg.text, seg.language),
            prompt_text=() if prompt is None else encode_text(im.vocab, prompt.text, prompt.language),
            language=ids.get(seg.language, 0),
        ))
    return picks


def listen(im: InferenceModel, latents: Sequence[np.ndarray]) -> tuple[list[tuple[np.ndarray, Any]], int]:
    """``latents`` (de-normalised ``[n d]`` arrays) as audio through ``im.audio_vocoder`` (in
    one batch when it has ``decode``), each at the vocoder's level, never clipped
    (`flowkit.synth.level.fit_level`): ``([(audio, level), ...], sample rate Hz)``.

    Raises:
        ConfigError: ``im`` was loaded without ``audio=True``.
    """
    from flowkit.synth.level import fit_level

    vocoder = im.audio_vocoder
    if vocoder is None:
        raise ConfigError("this model was loaded without a vocoder; load it with load_inference_model(..., audio=True)")
    if hasattr(vocoder, "decode"):
        audios, sr = vocoder.decode(list(latents), im.encoder)
    else:
        decoded = [vocoder(x, im.encoder) for x in latents]
        audios, sr = [a for a, _ in decoded], decoded[0][1]
    return [fit_level(audio, sr) for audio in audios], sr
