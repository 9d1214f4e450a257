"""Synthesis: integrate the learned flow from noise to latents, with classifier-free guidance.

Shape legend: b batch, n frames, d latent channels, nt characters, u units.

Generation is infilling: each item's frames are a prompt (clean latents of a reference
utterance, optional) followed by the target span to generate; the text is the prompt's
characters followed by the target's. `inference_conditions` builds that batch (deciding
each target length, from the duration head on the aligned text path), `synthesize` runs
the ODE solver, and `target_spans` cuts out the generated spans. The model reads and writes
normalised latents; `model_prompt` and `generated_latents` convert a prompt from, and the
generated spans back to, the scale the store and the vocoder use (`flowkit.data.stats.LatentStats`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from flowkit.errors import ConfigError
from flowkit.model.conditions import Conditions
from flowkit.model.dit import DiT
from flowkit.model.durations import char_units_from_ids, unit_frames_from_durations
from flowkit.protocols import Schedule, Solver

__all__ = ["Utterance", "generated_latents", "inference_conditions", "model_prompt", "recorded_labels", "synthesize",
           "target_spans"]


@attrs.frozen
class Utterance:
    """One utterance to synthesise.

    Attributes:
        text: character ids of the target text (the text front end's ``encode``).
        prompt: ``[n_p d]`` normalised latents of the prompt (speaker reference) or None.
        prompt_text: character ids of what is said in the prompt.
        target_frames: length of the target span in frames; None: estimated (aligned path:
            the predicted durations; unaligned: the prompt's frames per character).
        language, emotion, rate, loudness: ids as in `Conditions` (0 = unknown).
        intensity: emotion intensity in [0, 1], None when unknown.
    """

    text: Sequence[int]
    prompt: np.ndarray | torch.Tensor | None = None
    prompt_text: Sequence[int] = ()
    target_frames: int | None = None
    language: int = 0
    emotion: int = 0
    intensity: float | None = None
    rate: int = 0
    loudness: int = 0


def recorded_labels(segment: Any) -> dict[str, Any]:
    """The `Utterance` label fields (``emotion``, ``intensity``, ``rate``, ``loudness``) of a
    stored segment (`flowkit.data.dataset.SegmentInfo`, or anything with those attributes),
    as training conditioned on them: re-synthesising a stored sentence (the probe, the
    report's samples) gives the model its recorded labels, never an "unknown" it was not
    trained on.

    Raises:
        ValueError: an emotion name outside `flowkit.data.labels.EMOTIONS`.
    """
    from flowkit.data.labels import emotion_condition

    emotion, intensity = emotion_condition(segment.emotion, segment.intensity)
    return {
        "emotion": emotion,
        "intensity": intensity,
        "rate": int(segment.rate),
        "loudness": int(segment.loudness),
    }


def _prompt_tensor(u: Utterance, latent_dim: int) -> torch.Tensor:
    if u.prompt is None:
        return torch.zeros((0, latent_dim), dtype=torch.float32)
    p = torch.as_tensor(
        np.asarray(u.prompt) if not isinstance(u.prompt, torch.Tensor) else u.prompt
    )
    if p.dim() != 2 or p.shape[1] != latent_dim:
        raise ConfigError(
            f"prompt latents have shape {tuple(p.shape)}; expected [frames, {latent_dim}]"
        )
    return p.float().cpu()


def _unit_spans(char_unit: Sequence[int], frames: Sequence[tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """``(char_start, char_end, frame_start, frame_end)`` of unit ``k``: its run in ``char_unit``, ``frames[k]``."""
    k, first, count = np.unique(np.asarray(char_unit, np.int64), return_index=True, return_counts=True)
    return [(int(c), int(c + m), f0, f1) for c, m, (f0, f1) in zip(first[k >= 0], count[k >= 0], frames, strict=True)]


def inference_conditions(
    model: DiT,
    utterances: Sequence[Utterance],
    *,
    separator_ids: Collection[int] = (),
) -> Conditions:
    """`Conditions` for a batch of utterances: prompt frames then target span, no CFG dropout.

    The text of item ``i`` is ``prompt_text + text``. On the aligned text path the units are
    the runs of characters between ``separator_ids`` (e.g. the id of " "); the duration
    head sizes every unit; within the prompt (and within ``target_frames`` when that is
    given) the units keep their predicted lengths, centred, with the frames left over as
    silence at both edges (`flowkit.model.durations.unit_frames_from_durations`,
    ``silence="edges"``; scaled down only when they do not fit). On the unaligned
    path a missing ``target_frames`` is the prompt's frames per character times the target's
    characters (as F5-TTS estimates it). `Conditions.stack` pads and stacks the items.

    Raises:
        ConfigError: no utterances, empty text, prompt latents of the wrong width, or an
            unaligned model without ``target_frames`` or a prompt to estimate it from.
    """
    if not utterances:
        raise ConfigError("inference_conditions: no utterances given")
    device = next(model.parameters()).device
    d = model.latent_dim
    aligned = model.cfg.text_path == "aligned"
    prompts = [_prompt_tensor(u, d) for u in utterances]
    texts = [list(u.prompt_text) + list(u.text) for u in utterances]
    for i, u in enumerate(utterances):
        if not u.text:
            raise ConfigError(f"utterance {i}: empty text; give at least one character id")
    sep = set(separator_ids)
    labels = dict(text=texts, language=[u.language for u in utterances], rate=[u.rate for u in utterances],
                  loudness=[u.loudness for u in utterances], emotions=[(u.emotion, u.intensity) for u in utterances])

    n_prompt = [int(p.shape[0]) for p in prompts]
    units: list[list[tuple[int, int, int, int]]] = []
    char_units: list[list[int]] = []
    n_target: list[int] = []
    if aligned:
        # A unit never spans the prompt/target boundary: number the two parts separately.
        n_prompt_units: list[int] = []
        for u in utterances:
            pu = char_units_from_ids(list(u.prompt_text), sep)
            tu = char_units_from_ids(list(u.text), sep)
            n_prompt_units.append(max(pu, default=-1) + 1)
            char_units.append(pu + [k + n_prompt_units[-1] if k >= 0 else -1 for k in tu])
        # the durations read only the text and the global conditions: a draft of one frame an item
        draft = Conditions.stack([1] * len(utterances), [(0, 1)] * len(utterances), **labels).to(device)
        with torch.no_grad():
            log_duration = model.predict_durations(draft).cpu()
        for i, u in enumerate(utterances):
            k = len(u.prompt_text)
            pu, tu = char_units[i][:k], char_units[i][k:]
            shift = n_prompt_units[i]
            if n_prompt[i]:
                prompt_units = unit_frames_from_durations(
                    log_duration[i, :k], pu, start=0, total=n_prompt[i]
                )
            else:  # prompt text without prompt audio: its units get no frames
                prompt_units = [(0, 0)] * shift
            target_units = unit_frames_from_durations(
                log_duration[i, k : len(texts[i])],
                [x - shift if x >= 0 else -1 for x in tu],
                start=n_prompt[i],
                total=u.target_frames,
            )
            units.append(_unit_spans(char_units[i], prompt_units + target_units))
            end = target_units[-1][1] if target_units else n_prompt[i] + 1
            n_target.append(u.target_frames if u.target_frames is not None else end - n_prompt[i])
    else:
        for i, u in enumerate(utterances):
            if u.target_frames is not None:
                n_target.append(int(u.target_frames))
            elif n_prompt[i] and u.prompt_text:
                n_target.append(max(1, round(n_prompt[i] * len(u.text) / len(u.prompt_text))))
            else:
                raise ConfigError(
                    f"utterance {i}: give target_frames (or a prompt with its prompt_text to "
                    "estimate it): the unaligned text path has no duration model"
                )
    if any(t < 1 for t in n_target):
        raise ConfigError(f"target_frames must be >= 1, got {n_target}")

    total = [p + t for p, t in zip(n_prompt, n_target, strict=True)]
    spans = list(zip(n_prompt, total, strict=True))
    return Conditions.stack(total, spans, prompts=prompts, units=units if aligned else None, **labels).to(device)


@torch.no_grad()
def synthesize(
    model: DiT,
    cond: Conditions,
    *,
    schedule: Schedule,
    solver: Solver,
    steps: int = 32,
    cfg_strength: float = 2.0,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
    on_step: Callable[[float], None] | None = None,
) -> torch.Tensor:
    """Generate the target spans of ``cond``: latents ``[b n d]`` (normalised), prompt frames
    copied from ``cond.prompt``, zero on padding.

    The noise is drawn on the CPU from ``generator``, or given as ``noise [b n d]`` (exactly
    one of the two; `flowkit.evaluation` seeds each item's noise on its own so batching
    does not change it). Classifier-free guidance follows
    F5-TTS: ``v = v_cond + s (v_cond - v_uncond)`` with the unconditional pass dropping text
    AND prompt; ``s = 0`` is the conditional model alone (its pass is skipped). The model
    runs in eval mode (restored afterwards) and, on the aligned path, in the "even" phase.
    ``on_step`` (a progress display) is called with the flow time ``t`` in [0, 1) of every
    evaluation of the velocity field, whichever solver runs (the last ones fall in the
    solver's last step, never at t = 1).

    As F5-TTS's ``CFM.sample`` does, every evaluation of the field is one forward pass of
    the conditional and the unconditional items stacked in one batch, and what depends on
    neither the sample nor the time (text encoding, text on frames, durations, the prompt's
    and the text's input projection, masks, rotary tables, packing) is computed once per
    call (`flowkit.model.dit.DiT.prepare_sampling`). The outputs equal two separate passes
    per evaluation to float32 rounding (tests/synth/test_sample_fast.py).

    Raises:
        ConfigError: ``steps`` < 1 (from the solver), a negative ``cfg_strength``, or not
            exactly one of ``generator`` and ``noise`` (or noise of the wrong shape).
    """
    if cfg_strength < 0:
        raise ConfigError(f"cfg_strength = {cfg_strength!r} must be >= 0 (F5-TTS uses 2.0)")
    device = next(model.parameters()).device
    b, n = cond.frame_mask.shape
    if (generator is None) == (noise is None):
        raise ConfigError("synthesize: give exactly one of generator and noise")
    if noise is None:
        noise = torch.randn((b, n, model.latent_dim), generator=generator, dtype=torch.float32)
    elif tuple(noise.shape) != (b, n, model.latent_dim):
        raise ConfigError(f"synthesize: noise of shape {tuple(noise.shape)}; expected {(b, n, model.latent_dim)}")
    x0 = noise.to(device=device, dtype=torch.float32)
    guided = cfg_strength != 0
    was_training = model.training
    model.eval()
    try:
        field = _batched_field(model, cond, schedule, cfg_strength, guided, on_step)
        x1 = solver(field, x0, steps)
    finally:
        model.train(was_training)
    keep_prompt = (cond.frame_mask & ~cond.target_mask)[..., None]
    x1 = torch.where(keep_prompt, cond.prompt.to(x1.dtype), x1)
    return x1.masked_fill(~cond.frame_mask[..., None], 0.0)


def _batched_field(
    model: DiT, cond: Conditions, schedule: Schedule, s: float, guided: bool, on_step: Callable[[float], None] | None
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """dx/dt from one forward pass of the prepared conditions (both CFG passes stacked)."""
    b = cond.batch_size
    prepared = model.prepare_sampling(cond, guidance=guided)

    def field(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if on_step is not None:
            on_step(float(t))
        tb = t.reshape(()).expand(b).to(device=x.device, dtype=torch.float32)
        out = model(x, tb, prepared).output.float()
        if not guided:
            return schedule.velocity(x, tb, out)
        v, v_uncond = schedule.velocity(x, tb, out[:b]), schedule.velocity(x, tb, out[b:])
        return v + s * (v - v_uncond)

    return field


def target_spans(latents: torch.Tensor, cond: Conditions) -> list[torch.Tensor]:
    """The generated span of each item: ``[n_target_i d]`` cut from ``latents [b n d]``."""
    return [latents[i][cond.target_mask[i]] for i in range(latents.shape[0])]


def model_prompt(stats: Any, latents: np.ndarray | None) -> np.ndarray | None:
    """A prompt's latents ``[n_p d]`` as stored or encoded (de-normalised) -> as the model reads
    them (`Utterance.prompt`): ``stats.normalize`` (`flowkit.data.stats.LatentStats`) in the
    input's dtype, then float32. None stays None."""
    return None if latents is None else np.asarray(stats.normalize(latents), dtype=np.float32)


def generated_latents(latents: torch.Tensor, cond: Conditions, stats: Any) -> list[np.ndarray]:
    """Each item's generated span (`target_spans`), de-normalised with ``stats`` for the
    vocoder: one float32 ``[n_target_i d]`` array per item of ``latents [b n d]``."""
    return [np.asarray(stats.denormalize(s.float().cpu().numpy()), dtype=np.float32)
            for s in target_spans(latents, cond)]
