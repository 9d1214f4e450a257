"""`synthesize_file`: one utterance from a checkpoint to a WAV file (``flowkit synthesize``).

Shape legend: n frames, d latent channels.

The target length is decided in this order: ``seconds`` when given; else the duration
head (aligned text path); else the prompt's frames per character (unaligned path with a
prompt and its text); else a characters-per-second estimate of plain speech. The prompt
also sets the speaking-rate and loudness buckets the model is conditioned on (measured as
``flowkit prepare`` measures a training clip); without a prompt they are "unknown".

The vocoder is the one given, else the run's ``Trainer.vocoder``, else Griffin-Lim; it must
accept the checkpoint's encoder record (checked before any generation). The audio keeps
the vocoder's level or is normalised to ``loudness`` LUFS, and is never clipped
(`flowkit.synth.level`).
"""

from __future__ import annotations

import io
from pathlib import Path

import attrs
import numpy as np

from flowkit.errors import ConfigError, DataError

__all__ = ["CHARS_PER_SECOND", "SynthesisResult", "load_prompt_audio", "synthesize_file"]

# Read English speech runs at about 14-16 characters per second (spaces included); used
# only when neither a duration head nor a prompt can size the target.
CHARS_PER_SECOND = 15.0


@attrs.frozen
class SynthesisResult:
    """What `synthesize_file` wrote: the path, the length in frames and seconds, provenance."""

    path: Path
    frames: int
    seconds: float
    sample_rate: int
    label: str
    length_from: str
    vocoder: str = ""
    level: str = ""
    encoder_from: str = "checkpoint"
    warnings: tuple[str, ...] = ()  # one line each, e.g. a language the model never saw


def load_prompt_audio(audio_path: Path, encoder_record: dict, *, max_seconds: float = 15.0) -> tuple[np.ndarray, int]:
    """Prompt audio as mono samples ``[samples]`` at the store encoder's rate, cut to
    ``max_seconds``: ``(audio, sample_rate)``.

    Raises:
        DataError: the file cannot be decoded or is empty.
    """
    import soundfile as sf

    try:
        audio, sr = sf.read(str(audio_path), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile raises LibsndfileError / RuntimeError by version
        raise DataError(f"--prompt {audio_path}: cannot decode ({exc}); give a WAV or FLAC file") from exc
    audio = audio.mean(axis=1)
    if audio.size == 0:
        raise DataError(f"--prompt {audio_path}: the file holds no samples")
    target_sr = int(encoder_record.get("params", {}).get("sample_rate", sr))
    if sr != target_sr:
        import soxr

        audio = soxr.resample(audio, sr, target_sr).astype(np.float32)
    return audio[: int(max_seconds * target_sr)], target_sr


def synthesize_file(
    checkpoint: Path,
    text: str,
    out: Path,
    *,
    prompt: Path | None = None,
    prompt_text: str = "",
    steps: int = 32,
    cfg_strength: float = 2.0,
    seconds: float | None = None,
    language: str = "",
    weights: str = "ema",
    seed: int = 0,
    vocoder: object = None,
    loudness: float | None = None,
) -> SynthesisResult:
    """Synthesise ``text`` (optionally in the voice of ``prompt``) into the WAV file ``out``.

    Args:
        checkpoint: a checkpoint directory, or a run directory (best, else newest).
        prompt, prompt_text: reference audio and what it says (both or neither).
        steps, cfg_strength: ODE steps and classifier-free guidance strength.
        seconds: target length; None: estimated (see the module docstring).
        language: language code of the text ("" unknown; a one-language model uses its own).
        vocoder: a vocoder component; None: the run's ``Trainer.vocoder``, else Griffin-Lim.
        loudness: integrated loudness to normalise to (LUFS); None keeps the vocoder's level.

    Raises:
        ConfigError: empty text, a prompt without its text, a non-positive length, or a
            vocoder that cannot invert the checkpoint's latents.
        DataError: an unreadable prompt. CheckpointError: no valid checkpoint, or a
            vocoder directory that cannot be loaded.
    """
    import soundfile as sf

    from flowkit.data.encoder_records import check_vocoder, vocoder_label
    from flowkit.data.text import encode_text
    from flowkit.io import atomic_write_bytes
    from flowkit.synth.inference import generate, load_inference_model
    from flowkit.synth.level import fit_level
    from flowkit.synth.sample import Utterance
    from flowkit.synth.vocoders import choose_vocoder
    from flowkit.synth.wav import wav_bytes

    if not text.strip():
        raise ConfigError("--text is empty; give the words to speak")
    if prompt is not None and not prompt_text.strip():
        raise ConfigError(f"--prompt {prompt} needs --prompt-text (what the prompt says)")
    if seconds is not None and seconds <= 0:
        raise ConfigError(f"--seconds {seconds} must be > 0")
    im = load_inference_model(checkpoint, weights=weights)
    vocoder = vocoder if vocoder is not None else choose_vocoder(run_vocoder=im.vocoder)
    check_vocoder(vocoder, im.encoder, source=f"the latents of {im.checkpoint}")
    prompt_latents = None
    rate = loudness_id = 0
    if prompt is not None:
        from flowkit import registry
        from flowkit.data.labels import recorded_buckets

        wave, wave_sr = load_prompt_audio(prompt, dict(im.encoder))
        raw = np.asarray(registry.from_record("encoder", dict(im.encoder)).encode(wave), dtype=np.float32)
        prompt_latents = np.asarray(im.stats.normalize(raw), dtype=np.float32)
        # The speaker's pace and level, labelled as prepare labelled the training clips.
        rate, loudness_id = recorded_buckets(wave, wave_sr, prompt_text, im.frame_rate, int(raw.shape[0]))
    aligned = im.model.cfg.text_path == "aligned"
    if seconds is not None:
        frames, length_from = max(1, round(seconds * im.frame_rate)), "--seconds"
    elif aligned:
        frames, length_from = None, "duration head"
    elif prompt_latents is not None:
        frames, length_from = None, "prompt frames per character"
    else:
        frames = max(1, round(len(text) / CHARS_PER_SECOND * im.frame_rate))
        length_from = f"{CHARS_PER_SECOND:g} characters per second"
    lang = language or (im.languages[0] if len(im.languages) == 1 else "")
    warnings: list[str] = []
    if lang and lang not in im.languages:
        seen = ", ".join(im.languages) or "none recorded"
        warnings.append(f"--language {lang!r}: the model never saw it in training (languages: {seen}); "
                        "synthesising with the unknown-language condition")
    utterance = Utterance(
        text=encode_text(im.vocab, text, lang),
        prompt=prompt_latents,
        prompt_text=encode_text(im.vocab, prompt_text, lang) if prompt is not None else (),
        target_frames=frames,
        language=im.language_id(lang),
        rate=rate,
        loudness=loudness_id,
    )
    (latents,) = generate(im, [utterance], steps=steps, cfg_strength=cfg_strength, seed=seed)
    audio, sr = vocoder(latents, im.encoder)
    audio, level = fit_level(audio, sr, loudness)
    suffix = Path(out).suffix.lower()
    if suffix == ".wav":
        data = wav_bytes(audio, sr)
    else:  # soundfile's format from the extension (.flac, .ogg), encoded in memory
        buffer = io.BytesIO()
        sf.write(buffer, audio, sr, format=suffix.lstrip("."))
        data = buffer.getvalue()
    atomic_write_bytes(out, data)  # a crash mid-write leaves no half file under the name
    from flowkit.flow.solvers import describe_solver

    label = f"{im.label}, {steps} steps of {describe_solver(im.solver)}, CFG {cfg_strength}"
    return SynthesisResult(Path(out), int(latents.shape[0]), latents.shape[0] / im.frame_rate, sr, label,
                           length_from, vocoder_label(vocoder), level.describe(), im.encoder_from, tuple(warnings))
