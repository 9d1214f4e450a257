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

The parts come from `flowkit.synth.inference`, built once from the checkpoint's meta
(`load_inference_model`), and are handed down: the report only draws and captions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowkit.flow.solvers import describe_solver
from flowkit.report.document import Audio, Figure, Note, SampleBlock
from flowkit.report.plots import spectrograms_png
from flowkit.synth.wav import wav_bytes

__all__ = ["DEFAULT_STEPS", "sample_blocks"]

DEFAULT_STEPS = 32  # ODE steps (F5-TTS samples with 32 NFE)
DEFAULT_CFG = 2.0  # classifier-free guidance strength (F5-TTS default)


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

    Returns notes instead of samples when the run has no checkpoint (or one, or a run
    vocoder, that cannot be loaded), or no readable validation data.

    Raises:
        ConfigError: the vocoder cannot invert the checkpoint's latents (`check_vocoder`).
    """
    from flowkit.console import console
    from flowkit.errors import CheckpointError, DataError
    from flowkit.synth.inference import generate, listen, load_inference_model, validation_picks

    try:
        im = load_inference_model(run_dir, weights="ema", audio=True, vocoder=vocoder)
    except CheckpointError as exc:
        return [Note(f"No samples: {exc}")]
    try:
        picks = validation_picks(im, n)
    except DataError as exc:  # a moved or deleted store must not sink the whole report
        return [Note(f"No samples: {exc}")]
    if not picks:
        return [Note("No samples: the run has no validation data.")]
    label = im.label
    what = f"synthesising {len(picks)} sample(s) from {run_dir} ({label}, {steps} solver steps)"
    console.print(what + " ...", markup=False, highlight=False, soft_wrap=True)
    with console.status(what):  # a spinner on a terminal; nothing extra in a log file
        generated = generate(im, picks, steps=steps, cfg_strength=cfg_strength, seed=seed)
    blocks: list[Any] = []
    for k, (pick, gen) in enumerate(zip(picks, generated, strict=True)):
        seg, name = pick.segment, f"{prefix}sample{k + 1}"
        png = spectrograms_png([(f"generated ({im.weights}, step {im.step})", gen), ("ground truth", pick.truth)],
                               frame_rate=im.frame_rate)
        ((audio_gen, level_gen), (audio_true, level_true)), sr = listen(im, [gen, pick.truth])
        levels = f"generated: {level_gen.describe()}; ground truth: {level_true.describe()}"
        wavs = wav_bytes(audio_gen, sr), wav_bytes(audio_true, sr)
        prompt_note = f"prompt: {pick.prompt.segment_id}" if pick.prompt is not None else "no prompt (text only)"
        caption = (
            f'"{seg.text}" — speaker {seg.speaker or "?"}, {seg.n_frames} frames (length from the ground truth), '
            f"{prompt_note}; {label}, {steps} steps of {describe_solver(im.solver)}, CFG {cfg_strength}; "
            f"audio by {im.audio_label} at {sr} Hz — {levels}"
        )
        blocks.append(
            SampleBlock(
                title=f"{seg.segment_id}",
                caption=caption,
                figures=[Figure(f"{seg.segment_id}: generated vs ground truth", png, f"{name}.png")],
                audios=[
                    (f"generated ({im.weights}, step {im.step})", Audio(wavs[0], f"{name}-generated.wav")),
                    ("ground truth (same vocoder)", Audio(wavs[1], f"{name}-truth.wav")),
                ],
            )
        )
    return blocks
