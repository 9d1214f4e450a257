"""Listenable samples for a report: synthesise validation items and set them beside the truth.

Shape legend: n frames, d latent channels.

For each chosen validation item the target is its own text at its true length (so the
generated and ground-truth spectrograms line up frame by frame), and the speaker prompt
is another validation item of the same speaker with its text, as at inference; an item
whose speaker has no other validation item is generated from the text alone. Audio of
both comes from one vocoder on de-normalised latents: the one given (``report
--vocoder``), else the run's ``Trainer.vocoder``, else ``vocoder.griffin_lim``; it must
accept the checkpoint's encoder record, or the report stops with one line. Audio keeps the
vocoder's level and is never clipped (`flowkit.synth.level`). Every sample names the
weights (EMA or raw) and step that made it, the vocoder and the level of each clip.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from flowkit.flow.solvers import describe_solver
from flowkit.report.document import Audio, Figure, Note, SampleBlock
from flowkit.report.plots import spectrograms_png
from flowkit.synth.level import fit_level
from flowkit.synth.wav import wav_bytes

__all__ = ["DEFAULT_STEPS", "sample_blocks"]

DEFAULT_STEPS = 32  # ODE steps (F5-TTS samples with 32 NFE)
DEFAULT_CFG = 2.0  # classifier-free guidance strength (F5-TTS default)
MAX_PROMPT_FRAMES = 300  # 3 s at 100 Hz: enough to carry the voice, cheap on a CPU


def _choose(n_items: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``n_items`` (deterministic: the same report twice)."""
    if k >= n_items:
        return list(range(n_items))
    return sorted({int(round(i * (n_items - 1) / max(k - 1, 1))) for i in range(k)})


def _decode(vocoder: Any, latents: list[np.ndarray], encoder: Any) -> tuple[list[np.ndarray], int]:
    """Decode several clips, in one batch when the vocoder can (``decode``)."""
    if hasattr(vocoder, "decode"):
        return vocoder.decode(latents, encoder)
    decoded = [vocoder(x, encoder) for x in latents]
    return [a for a, _ in decoded], decoded[0][1]


def sample_blocks(
    run_dir: Path,
    n: int,
    *,
    prefix: str = "",
    vocoder: Any = None,
    steps: int = DEFAULT_STEPS,
    cfg_strength: float = DEFAULT_CFG,
    seed: int = 0,
) -> list[Any]:
    """Up to ``n`` `SampleBlock` s from ``run_dir``'s best (EMA) checkpoint, else its newest.

    Returns notes instead of samples when the run has no checkpoint or no validation data.

    Raises:
        ConfigError: the vocoder cannot invert the checkpoint's latents (`check_vocoder`).
        CheckpointError: a vocoder directory that cannot be loaded.
    """
    from flowkit.data.dataset import LatentDataset
    from flowkit.data.encoder_records import check_vocoder, vocoder_label
    from flowkit.errors import CheckpointError
    from flowkit.synth.inference import generate, load_inference_model
    from flowkit.synth.sample import Utterance, recorded_labels
    from flowkit.synth.vocoders import choose_vocoder
    from flowkit.text.vocabs import encode_text

    try:
        im = load_inference_model(run_dir, weights="ema")
    except CheckpointError as exc:
        return [Note(f"No samples: {exc}")]
    vocoder = vocoder if vocoder is not None else choose_vocoder(run_vocoder=im.vocoder)
    check_vocoder(vocoder, im.encoder, source=f"the latents of {run_dir}")
    try:
        data = LatentDataset.open(list(im.stores), "val")
    except Exception as exc:  # a moved or deleted store must not sink the whole report
        return [Note(f"No samples: the run's stores cannot be read ({type(exc).__name__}: {exc})")]
    try:
        if len(data) == 0:
            return [Note("No samples: the run has no validation data.")]
        chosen = _choose(len(data), n)
        segments = data.segments
        # A prompt is a whole clip, so that its text is what its audio says (cutting a clip
        # at MAX_PROMPT_FRAMES kept text the audio no longer had): the first other item of
        # the speaker that fits, else the speaker's shortest other item.
        prompts = {}
        for i in chosen:
            same = [j for j, s in enumerate(segments) if j != i and s.speaker == segments[i].speaker]
            fits = [j for j in same if segments[j].n_frames <= MAX_PROMPT_FRAMES]
            prompts[i] = (fits or sorted(same, key=lambda j: (segments[j].n_frames, j)) or [None])[0]
        needed = sorted(set(chosen) | {j for j in prompts.values() if j is not None})
        latents = dict(zip(needed, data.read(needed), strict=True))
    finally:
        data.close()

    utterances = []
    for i in chosen:
        seg = segments[i]
        j = prompts[i]
        prompt = None if j is None else np.asarray(im.stats.normalize(latents[j]), dtype=np.float32)
        utterances.append(
            Utterance(
                text=encode_text(im.vocab, seg.text, seg.language),
                prompt=prompt,
                prompt_text=encode_text(im.vocab, segments[j].text, segments[j].language) if j is not None else (),
                target_frames=int(seg.n_frames),
                language=im.language_id(seg.language),
                **recorded_labels(seg),
            )
        )
    from flowkit.console import console

    what = f"synthesising {len(utterances)} sample(s) from {run_dir} ({im.label}, {steps} solver steps)"
    console.print(what + " ...", markup=False, highlight=False, soft_wrap=True)
    with console.status(what):  # a spinner on a terminal; nothing extra in a log file
        generated = generate(im, utterances, steps=steps, cfg_strength=cfg_strength, seed=seed)
    blocks: list[Any] = []
    for k, (i, gen) in enumerate(zip(chosen, generated, strict=True)):
        seg, truth = segments[i], latents[i].astype(np.float32)
        j = prompts[i]
        name = f"{prefix}sample{k + 1}"
        png = spectrograms_png([(f"generated ({im.weights}, step {im.step})", gen), ("ground truth", truth)],
                               frame_rate=im.frame_rate)
        (audio_gen, audio_true), sr = _decode(vocoder, [gen, truth], im.encoder)
        audio_gen, level_gen = fit_level(audio_gen, sr)
        audio_true, level_true = fit_level(audio_true, sr)
        prompt_note = f"prompt: {segments[j].segment_id}" if j is not None else "no prompt (text only)"
        caption = (
            f'"{seg.text}" — speaker {seg.speaker or "?"}, {seg.n_frames} frames (length from the ground truth), '
            f"{prompt_note}; {im.label}, {steps} steps of {describe_solver(im.solver)}, CFG {cfg_strength}; "
            f"audio by {vocoder_label(vocoder)} at {sr} Hz — generated: {level_gen.describe()}; "
            f"ground truth: {level_true.describe()}"
        )
        blocks.append(
            SampleBlock(
                title=f"{seg.segment_id}",
                caption=caption,
                figures=[Figure(f"{seg.segment_id}: generated vs ground truth", png, f"{name}.png")],
                audios=[
                    (f"generated ({im.weights}, step {im.step})", Audio(wav_bytes(audio_gen, sr), f"{name}-generated.wav")),
                    ("ground truth (same vocoder)", Audio(wav_bytes(audio_true, sr), f"{name}-truth.wav")),
                ],
            )
        )
    return blocks

