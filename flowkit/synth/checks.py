"""Checks of what a user asks a model to say, each giving one warning line (never silence).

Shape legend: s samples.

`flowkit synthesize` and the training probe run these before they synthesise: text the
vocabulary cannot spell, and prompt audio that carries no voice (silent, shorter than a
clip `flowkit prepare` keeps, a truncated WAV, noise). `cut_prompt` cuts a prompt longer
than the prompt maximum at a pause and its text in proportion, and says so. None of them
raises: the synthesis goes on, and the warning says what the output will lack.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "NOISE_FLATNESS",
    "cut_prompt",
    "prompt_warnings",
    "spectral_flatness",
    "text_warnings",
    "unknown_symbols",
    "wav_truncation",
]

# Median spectral flatness of a clip's active frames: 0.0003-0.076 on the 150 recorded
# clips of data/asterisk-5voice and the bundled demo (speech and tones are peaky), 0.56 for
# white noise (the expected flatness of a Gaussian periodogram, e^-0.577). Above this the
# prompt is noise, e.g. a WAV header over random bytes.
NOISE_FLATNESS = 0.3


def _prepare_defaults() -> tuple[float, float]:
    """``(min_seconds, silence_dbfs)`` of `flowkit prepare`: what a training clip must meet."""
    import attrs

    from flowkit.data.prepare_settings import PrepareSettings

    fields = attrs.fields(PrepareSettings)
    return float(fields.min_seconds.default), float(fields.silence_dbfs.default)


def unknown_symbols(vocab: Any, text: str, language: str = "") -> tuple[int, int, list[str]]:
    """``(unknown, spoken, missing)`` for ``text``: how many of its ids the vocabulary does
    not know, how many ids are not word separators, and the missing characters (or tokens)
    themselves (`flowkit.text.vocabs.missing_tokens`).

    Any front end's vocabulary works: its ``unknown_count`` grows by the ids it could not
    find (`flowkit.text.chars`, ``text_f5``, ``text_phonemes``).
    """
    from flowkit.text.vocabs import encode_text, missing_tokens

    before = int(getattr(vocab, "unknown_count", 0))
    ids = encode_text(vocab, text, language)
    unknown = int(getattr(vocab, "unknown_count", 0)) - before
    # word separators do not count as spoken, where the vocabulary knows the space
    mark = int(getattr(vocab, "unknown_count", 0))
    space = set(encode_text(vocab, " ", language)) if " " in text else set()
    if int(getattr(vocab, "unknown_count", 0)) != mark:
        space = set()
    if hasattr(vocab, "unknown_count"):
        vocab.unknown_count = before  # a check is not synthesis: leave the counter as it was
    spoken = sum(1 for i in ids if i not in space)
    missing = missing_tokens(vocab, [text], [language])
    return unknown, spoken, missing


def text_warnings(vocab: Any, text: str, language: str = "", *, what: str = "--text") -> list[str]:
    """One line when ``text`` holds characters the model's vocabulary lacks (none when it knows them all).

    ``what`` names the input in the line (``--text``, ``--prompt-text``, a probe sentence).
    """
    unknown, spoken, missing = unknown_symbols(vocab, text, language)
    if unknown == 0:
        return []
    shown = "".join(missing[:12]) + ("..." if len(missing) > 12 else "")
    listed = f" ({shown!r})" if shown else ""
    if unknown >= spoken:
        return [f"{what}: none of its characters{listed} is in the model's vocabulary; the model reads it all as "
                "the unknown symbol and can only speak noise: give text in the script the model was trained on"]
    return [f"{what}: {unknown} of its {spoken} characters{listed} {'is' if unknown == 1 else 'are'} "
            "not in the model's vocabulary and are read as "
            "the unknown symbol; those sounds will be missing or wrong"]


def wav_truncation(path: Path) -> str | None:
    """What is wrong when ``path`` is a RIFF WAV whose data chunk promises more bytes than the
    file holds (a copy cut short: decoders read what is there and say nothing), else None."""
    try:
        size = Path(path).stat().st_size
        with open(path, "rb") as f:
            head = f.read(12)
            if len(head) < 12 or head[:4] not in (b"RIFF", b"RIFX") or head[8:12] != b"WAVE":
                return None
            order = "little" if head[:4] == b"RIFF" else "big"
            pos = 12
            while pos + 8 <= size:
                f.seek(pos)
                chunk = f.read(8)
                name, length = chunk[:4], int.from_bytes(chunk[4:8], order)
                if name == b"data":
                    held = size - pos - 8
                    # 0 and 0xFFFFFFFF mark a stream whose writer never went back to fill the size in
                    if length not in (0, 0xFFFFFFFF) and length > held:
                        return (f"its header promises {length:,} bytes of samples but the file holds {held:,} "
                                f"({held / length:.0%}): truncated")
                    return None
                pos += 8 + length + (length & 1)
    except OSError:
        return None
    return None


def spectral_flatness(wave: np.ndarray, n_fft: int = 512) -> float:
    """Median spectral flatness (geometric over arithmetic mean of the power spectrum) of the
    active frames of ``wave [s]`` (within 30 dB of the loudest): near 0 for speech and tones,
    about 0.56 for white noise; NaN for a clip shorter than one frame."""
    wave = np.asarray(wave, dtype=np.float64)
    if wave.size < n_fft:
        return float("nan")
    frames = np.lib.stride_tricks.sliding_window_view(wave, n_fft)[:: n_fft // 2] * np.hanning(n_fft)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2 + 1e-20
    flatness = np.exp(np.mean(np.log(power), axis=1)) / np.mean(power, axis=1)
    energy = power.sum(axis=1)
    return float(np.median(flatness[energy >= energy.max() * 1e-3]))


def prompt_warnings(path: Path | str, wave: np.ndarray, sample_rate: int) -> list[str]:
    """Lines about a prompt ``wave [s]`` (decoded from ``path``) that cannot carry a voice:
    silent (below `flowkit prepare`'s silence level), shorter than its shortest clip, a
    truncated WAV, or noise (`NOISE_FLATNESS`). Empty for a usable prompt."""
    from flowkit.data.audio import active_level_db

    min_seconds, silence_dbfs = _prepare_defaults()
    out = []
    seconds = len(wave) / float(sample_rate)
    cut = wav_truncation(Path(path))
    if cut:
        out.append(f"--prompt {path}: {cut}; the voice is taken from the {seconds:.2f} s that decode")
    if seconds < min_seconds:
        out.append(f"--prompt {path}: only {seconds:.2f} s, shorter than the {min_seconds:g} s flowkit prepare "
                   "keeps as a clip: too little of the voice to copy; give 2-10 s of speech")
    level = active_level_db(np.asarray(wave, dtype=np.float32), int(sample_rate))
    if not np.isfinite(level) or level < silence_dbfs:
        out.append(f"--prompt {path}: silent (active level {level:.1f} dBFS < {silence_dbfs:g} dBFS, flowkit "
                   "prepare's silence level): there is no voice to copy; give a recording of speech")
        return out
    flatness = spectral_flatness(wave)
    if np.isfinite(flatness) and flatness > NOISE_FLATNESS:
        out.append(f"--prompt {path}: sounds like noise, not speech (spectral flatness {flatness:.2f}; recorded "
                   f"speech measures below 0.1): a corrupt or wrong file? The model will copy the noise")
    return out


def _pause_cut(wave: np.ndarray, sample_rate: int, limit: int) -> int:
    """The sample to cut at: the quietest 10 ms frame in the last second before ``limit``."""
    hop = max(1, int(sample_rate) // 100)
    start = max(0, limit - int(sample_rate))
    window = np.asarray(wave[start:limit], dtype=np.float64)
    n = len(window) // hop
    if n < 2:
        return limit
    energy = (window[: n * hop].reshape(n, hop) ** 2).mean(axis=1)
    quietest = int(np.argmin(energy[::-1]))  # the latest of equally quiet frames: keep the most speech
    return start + (n - quietest) * hop


def cut_prompt(wave: np.ndarray, sample_rate: int, text: str, max_seconds: float, *,
               path: Path | str = "") -> tuple[np.ndarray, str, str | None]:
    """``(wave, text, warning)``: a prompt longer than ``max_seconds`` cut at a pause in its
    last second, and its ``text`` cut to the same share of its words (an estimate: speech
    runs at an even pace), with the line saying so; an unchanged prompt and None otherwise.
    At least one word of the text is kept."""
    limit = int(max_seconds * sample_rate)
    if len(wave) <= limit:
        return wave, text, None
    keep = _pause_cut(wave, sample_rate, limit)
    words = text.split()
    share = keep / len(wave)
    kept_words: Sequence[str] = words[: max(1, int(round(len(words) * share)))]
    kept_text = " ".join(kept_words)
    line = (f"--prompt {path}: {len(wave) / sample_rate:.1f} s is longer than the {max_seconds:g} s prompt maximum; "
            f"using its first {keep / sample_rate:.1f} s (cut at a pause) and the same share of --prompt-text, "
            f"{len(kept_words)} of {len(words)} words ({kept_text!r}); for an exact match give a prompt of at most "
            f"{max_seconds:g} s with its own text")
    return wave[:keep], kept_text, line
