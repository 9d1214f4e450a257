"""`synthesize_file`: one utterance from a checkpoint to a WAV file (``flowkit synthesize``).

Shape legend: n frames, d latent channels.

The target length is decided in this order: ``seconds`` when given; else the duration
head (aligned text path); else the prompt's frames per character (unaligned path with a
prompt and its text); else a characters-per-second estimate of plain speech. The prompt
also sets the speaking-rate and loudness buckets the model is conditioned on (measured as
``flowkit prepare`` measures a training clip); without a prompt they are "unknown".

One piece of speech is at most ``max_seconds`` (prompt included; default `MAX_SECONDS`, the
longest clip `flowkit prepare` keeps, so no model it trained has heard longer): a longer
text is split at sentence ends, then clause commas, then spaces, and the pieces are
synthesised one after another (noise seed ``seed + k`` for piece k) and joined before the
vocoder; a single word that does not fit is refused with the cap. Long work shows a
progress bar over ODE steps (`flowkit.console.Progress`). What the model cannot do with the
inputs is said in one warning line each (`flowkit.synth.checks`): text outside its
vocabulary, a language it never saw, a silent, too short, truncated or noise-like prompt,
and a prompt cut to `MAX_PROMPT_SECONDS` (its text is cut to the same share of words).

The vocoder is the one given, else the run's ``Trainer.vocoder``, else Griffin-Lim; it must
accept the checkpoint's encoder record (checked before any generation). The audio keeps
the vocoder's level or is normalised to ``loudness`` LUFS, and is never clipped
(`flowkit.synth.level`).
"""

from __future__ import annotations

import bisect
import io
import re
from collections.abc import Callable
from pathlib import Path

import attrs
import numpy as np

from flowkit.errors import ConfigError, DataError

__all__ = ["CHARS_PER_SECOND", "MAX_PROMPT_SECONDS", "MAX_SECONDS", "SynthesisResult", "load_prompt_audio",
           "split_text", "synthesize_file"]

# Read English speech runs at about 14-16 characters per second (spaces included); used
# only when neither a duration head nor a prompt can size the target.
CHARS_PER_SECOND = 15.0
# One piece of speech, prompt included: prepare.max_seconds, the longest clip a store keeps.
MAX_SECONDS = 30.0
# The longest prompt used (longer ones are cut at a pause): the voice is in the first seconds.
MAX_PROMPT_SECONDS = 15.0
# Synthesis of more speech than this (or of several pieces) shows a progress bar.
PROGRESS_SECONDS = 10.0
# Where a long text may be split, tried in this order: sentence ends, clause marks, spaces.
_SPLITS = (r"(?<=[.!?;:。！？])\s+", r"(?<=[,、，])\s+", r"\s+")


@attrs.frozen
class SynthesisResult:
    """What `synthesize_file` wrote: the path, the latent frames generated, the seconds of
    audio written (the vocoder's output: a frame fewer than ``frames`` at the frame rate for
    a centred inverse STFT), provenance."""

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
    pieces: int = 1  # text pieces synthesised one after another (a text longer than max_seconds)


def _check_prompt_path(path: Path) -> None:
    if path.is_dir():
        raise DataError(f"--prompt {path} is a folder; give one audio file (WAV or FLAC)")
    if not path.exists():
        raise DataError(f"--prompt {path}: no such file")


def load_prompt_audio(audio_path: Path, encoder_record: dict, *, max_seconds: float = 15.0) -> tuple[np.ndarray, int]:
    """Prompt audio as mono samples ``[samples]`` at the store encoder's rate, cut to
    ``max_seconds``: ``(audio, sample_rate)``.

    Raises:
        DataError: no such file, a folder, a file that cannot be decoded, is empty, or holds
            NaN or infinite samples.
    """
    import soundfile as sf

    _check_prompt_path(Path(audio_path))
    try:
        audio, sr = sf.read(str(audio_path), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile raises LibsndfileError / RuntimeError by version
        raise DataError(f"--prompt {audio_path}: cannot decode ({exc}); give a WAV or FLAC file") from exc
    bad = int(audio.size - np.isfinite(audio).sum())
    if bad:  # a float file can hold them; every measure and encoder after this would fail on them
        raise DataError(f"--prompt {audio_path}: {bad} of {audio.size} samples are NaN or infinite; "
                        "give a clean recording")
    audio = audio.mean(axis=1)
    if audio.size == 0:
        raise DataError(f"--prompt {audio_path}: the file holds no samples")
    target_sr = int(encoder_record.get("params", {}).get("sample_rate", sr))
    if sr != target_sr:
        import soxr

        audio = soxr.resample(audio, sr, target_sr).astype(np.float32)
    return audio[: int(max_seconds * target_sr)], target_sr


def split_text(text: str, fits: Callable[[str], bool], cap: str = "") -> list[str]:
    """``text`` as one piece when ``fits(text)``, else pieces that each fit, split at sentence
    ends, then at clause commas, then at spaces (packing as many parts into a piece as fit);
    ``cap`` describes the limit in the error.

    Raises:
        ConfigError: a single word that does not fit.
    """
    def pieces(part: str, level: int) -> list[str]:
        if fits(part):
            return [part]
        if level == len(_SPLITS):
            raise ConfigError(f"--text: the word {part[:40]!r} alone is longer than one piece of speech may be"
                              f"{f' ({cap})' if cap else ''}; shorten it, or raise --max-seconds")
        out: list[str] = []
        current = ""
        for chunk in re.split(_SPLITS[level], part.strip()):
            joined = f"{current} {chunk}" if current else chunk
            if current and not fits(joined):
                out.extend(pieces(current, level + 1))
                current = chunk
            else:
                current = joined
        out.extend(pieces(current, level + 1))
        return out

    return pieces(text.strip(), 0)


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
    max_seconds: float = MAX_SECONDS,
    on_warning: Callable[[str], None] | None = None,
    progress: bool = False,
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
        max_seconds: the longest piece of speech, prompt included (seconds); longer text is split.
        on_warning: called with each warning line as it arises (they are also in ``warnings``).
        progress: show a progress bar over ODE steps when the work is long (`PROGRESS_SECONDS`).

    Raises:
        ConfigError: empty text, a prompt without its text, a non-positive length, a
            ``max_seconds`` the prompt leaves no room in, a word longer than one piece, or
            a vocoder that cannot invert the checkpoint's latents.
        DataError: an unreadable prompt. CheckpointError: no valid checkpoint, or a
            vocoder directory that cannot be loaded.
    """
    import soundfile as sf

    from flowkit.console import Progress
    from flowkit.converters.cpu import sampling_kernels
    from flowkit.flow.solvers import time_grid
    from flowkit.io import atomic_write_bytes
    from flowkit.synth.checks import cut_prompt, prompt_warnings, text_warnings
    from flowkit.synth.inference import generate, load_inference_model
    from flowkit.synth.level import fit_level
    from flowkit.synth.sample import Utterance, inference_conditions, model_prompt
    from flowkit.synth.wav import output_format, wav_bytes
    from flowkit.text.vocabs import encode_text

    output_format(Path(out))  # a folder or a name without .wav: said before the model is loaded
    if prompt is not None:
        _check_prompt_path(Path(prompt))
    if not text.strip():
        raise ConfigError("--text is empty; give the words to speak")
    if prompt is not None and not prompt_text.strip():
        raise ConfigError(f"--prompt {prompt} needs --prompt-text (what the prompt says)")
    if seconds is not None and seconds <= 0:
        raise ConfigError(f"--seconds {seconds} must be > 0")
    if not max_seconds > 0:
        raise ConfigError(f"--max-seconds {max_seconds} must be > 0 (default {MAX_SECONDS:g})")
    warnings: list[str] = []

    def warn(lines: list[str]) -> None:
        for line in lines:
            warnings.append(line)
            if on_warning is not None:
                on_warning(line)

    im = load_inference_model(checkpoint, weights=weights, audio=True, vocoder=vocoder)
    vocoder = im.audio_vocoder
    lang = language or (im.languages[0] if len(im.languages) == 1 else "")
    seen = ", ".join(im.languages) or "none recorded"
    if lang and lang not in im.languages:
        warn([f"--language {lang!r}: the model never saw it in training (languages: {seen}); "
              "synthesising with the unknown-language condition"])
    elif not lang and len(im.languages) > 1:
        warn([f"no --language given and the model knows several ({seen}): synthesising with the "
              "unknown-language condition; give --language"])
    warn(text_warnings(im.vocab, text, lang, what="--text"))
    prompt_latents = None
    rate = loudness_id = 0
    if prompt is not None:
        from flowkit import registry
        from flowkit.data.labels import recorded_buckets

        # read whole (a day is no cut): cut_prompt cuts at a pause, with its text, and says so
        wave, wave_sr = load_prompt_audio(prompt, dict(im.encoder), max_seconds=86400.0)
        warn(prompt_warnings(prompt, wave, wave_sr))
        wave, prompt_text, cut = cut_prompt(wave, wave_sr, prompt_text, MAX_PROMPT_SECONDS, path=prompt)
        warn([cut] if cut else [])
        warn(text_warnings(im.vocab, prompt_text, lang, what="--prompt-text"))
        raw = np.asarray(registry.from_record("encoder", dict(im.encoder)).encode(wave), dtype=np.float32)
        prompt_latents = model_prompt(im.stats, raw)
        # The speaker's pace and level, labelled as prepare labelled the training clips.
        rate, loudness_id = recorded_buckets(wave, wave_sr, prompt_text, im.frame_rate, int(raw.shape[0]))
    aligned = im.model.cfg.text_path == "aligned"
    n_prompt = 0 if prompt_latents is None else int(prompt_latents.shape[0])
    base = Utterance(
        text=(),
        prompt=prompt_latents,
        prompt_text=encode_text(im.vocab, prompt_text, lang) if prompt is not None else (),
        language=im.language_id(lang),
        rate=rate,
        loudness=loudness_id,
    )
    if seconds is not None:
        length_from = "--seconds"
    elif aligned:
        length_from = "duration head"
    elif prompt_latents is not None:
        length_from = "prompt frames per character"
    else:
        length_from = f"{CHARS_PER_SECOND:g} characters per second"
    space = [i for i in im.vocab.encode(" ") if i > 1]

    def target_frames(piece: str) -> int | None:
        """The Utterance's target_frames: given by --seconds (shared by characters) or the
        plain-speech rate; None where the model sizes it (duration head, prompt rate)."""
        if seconds is not None:
            return max(1, round(seconds * im.frame_rate * len(piece.strip()) / len(text.strip())))
        if aligned or prompt_latents is not None:
            return None
        return max(1, round(len(piece) / CHARS_PER_SECOND * im.frame_rate))

    def expected_frames(piece: str) -> int:
        """The frames ``piece`` will take (as `inference_conditions` sizes it)."""
        given = target_frames(piece)
        if given is not None:
            return given
        ids = encode_text(im.vocab, piece, lang)
        cond = inference_conditions(im.model, [attrs.evolve(base, text=ids)], separator_ids=space)
        return int(cond.target_mask.sum())

    cap = int(max_seconds * im.frame_rate)
    if n_prompt >= cap:
        raise ConfigError(f"--max-seconds {max_seconds:g} leaves no room for speech after the "
                          f"{n_prompt / im.frame_rate:.1f} s prompt; raise it (default {MAX_SECONDS:g})")
    # A text that fits is synthesised whole, as given. A longer one is split by the whole
    # text's frames per character (one estimate: a duration-head pass per candidate piece
    # cost 0.4 s each on a loaded CPU), and each piece is sized as a text of its own.
    total = expected_frames(text)
    per_char = total / max(len(text.strip()), 1)
    pieces = [text] if n_prompt + total <= cap else split_text(
        text, lambda piece: n_prompt + per_char * len(piece) <= cap,
        f"--max-seconds {max_seconds:g}, the prompt's {n_prompt / im.frame_rate:.1f} s included, at about "
        f"{per_char / im.frame_rate * 1000:.0f} ms per character")
    if len(pieces) > 1:
        warn([f"--text: about {total / im.frame_rate:.0f} s of speech, more than the {max_seconds:g} s (prompt "
              f"included) the model speaks at once (--max-seconds): split into {len(pieces)} pieces at sentence, "
              "clause or word boundaries, synthesised one after another"])
    grid = [float(t) for t in time_grid(steps, "cpu", getattr(im.solver, "sway", None))]
    frames_out, audios, sr = 0, [], 0
    show = progress and (len(pieces) > 1 or total / im.frame_rate > PROGRESS_SECONDS)
    # the CPU kernels faster for forward passes on this machine, measured once (flowkit.converters.cpu)
    with sampling_kernels(im.model):
        # one unit per ODE step and one for the vocoder, per piece
        with Progress("synthesising", len(pieces) * (steps + 1), unit="steps", plain_every=steps + 1,
                      enabled=show) as bar:
            for k, piece in enumerate(pieces):
                done = [0]
                where = f"{k + 1}/{len(pieces)}"

                def on_step(t: float, where: str = where, done: list[int] = done) -> None:
                    reached = bisect.bisect_right(grid, t) - 1  # the ODE step this evaluation belongs to
                    if reached > done[0]:
                        bar.update(reached - done[0], piece=where)
                        done[0] = reached

                utterance = attrs.evolve(base, text=encode_text(im.vocab, piece, lang),
                                         target_frames=target_frames(piece))
                (latents,) = generate(im, [utterance], steps=steps, cfg_strength=cfg_strength, seed=seed + k,
                                      on_step=on_step)
                bar.update(steps - done[0], piece=where, stage="vocoder")
                audio, sr = vocoder(latents, im.encoder)
                bar.update(1, piece=where, stage="done")
                audios.append(np.asarray(audio, dtype=np.float32))
                frames_out += int(latents.shape[0])
    audio, level = fit_level(np.concatenate(audios) if len(audios) > 1 else audios[0], sr, loudness)
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
    return SynthesisResult(Path(out), frames_out, audio.shape[0] / sr, sr, label,
                           length_from, im.audio_label, level.describe(), im.encoder_from, tuple(warnings),
                           len(pieces))
