"""Which sentences the probe speaks, with which prompt, and what it cannot measure as asked.

Shape legend: n frames, d latent channels.

The sentences are spread evenly over the split, per language the recogniser knows (at most
``Probe.sentences`` each); each one's prompt is a whole clip of the same speaker (the next
chosen sentence that is at most `MAX_PROMPT_FRAMES` long, else the speaker's shortest other
clip), so its text is what its audio says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError
from flowkit.train.probe.settings import ProbeSettings

__all__ = ["MAX_PROMPT_FRAMES", "ProbeSelection", "ProbeSentence", "input_warnings", "select_sentences"]

MAX_PROMPT_FRAMES = 300  # 3 s at 100 Hz: enough to carry the voice, cheap on a CPU


@attrs.frozen
class ProbeSentence:
    """One probe sentence: its segment, text, language, true frames and prompt segment, and
    the labels it was recorded with (emotion, intensity, rate and loudness buckets; 0 / ""
    unknown), which condition its synthesis as they conditioned its training."""

    segment_id: str
    text: str
    language: str
    speaker: str
    n_frames: int
    prompt_id: str | None
    emotion: str = ""
    intensity: float = float("nan")
    rate: int = 0
    loudness: int = 0


def _choose(n_items: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``n_items`` (all when there are fewer)."""
    if k >= n_items:
        return list(range(n_items))
    return sorted({int(round(i * (n_items - 1) / max(k - 1, 1))) for i in range(k)})


@attrs.frozen
class ProbeSelection:
    """The chosen sentences, read once: their dataset indices, `ProbeSentence` s, true latents
    ``[n d]`` (float32, as stored: not normalised), prompt latents (None: no prompt) and
    prompt texts ("" without a prompt), all aligned."""

    indices: list[int]
    sentences: list[ProbeSentence]
    truth: list[np.ndarray]
    prompts: list[np.ndarray | None]
    prompt_texts: list[str]


def select_sentences(settings: ProbeSettings, dataset: Any, known: set[str]) -> ProbeSelection:
    """The probe sentences of ``dataset`` (a `LatentDataset` of the probe's split) in the
    languages ``known`` to the recogniser (and in ``Probe.languages`` when set).

    Raises:
        ConfigError: the split holds no sentence in a language the recogniser knows.
    """
    wanted = set(settings.languages) if settings.languages else known
    segments = dataset.segments
    by_language: dict[str, list[int]] = {}
    for i, seg in enumerate(segments):
        if seg.language in wanted and seg.language in known:
            by_language.setdefault(seg.language, []).append(i)
    if not by_language:
        raise ConfigError(
            f"Probe: the {settings.split!r} split holds no segment in a language the recogniser knows "
            f"({', '.join(sorted(known)) or 'none'}); set Probe.split, Probe.languages or Probe.asr"
        )
    chosen: list[int] = []
    for lang in sorted(by_language):
        pool = by_language[lang]
        chosen.extend(pool[j] for j in _choose(len(pool), settings.sentences))
    prompts: dict[int, int | None] = {}
    for k, i in enumerate(chosen):
        # A prompt is a whole clip: its text must be what its audio says (a clip cut at
        # MAX_PROMPT_FRAMES would keep text its audio no longer has). The next chosen
        # sentence of the speaker that fits, else the shortest other clip of the speaker.
        same = [j for j in chosen[k + 1:] + chosen[:k] if segments[j].speaker == segments[i].speaker]
        fits = [j for j in same if segments[j].n_frames <= MAX_PROMPT_FRAMES]
        if not fits:
            others = [j for j in range(len(segments)) if j != i and segments[j].speaker == segments[i].speaker]
            fits = sorted(others, key=lambda j: (segments[j].n_frames, j))[:1]
        prompts[i] = fits[0] if fits else None
    needed = sorted(set(chosen) | {j for j in prompts.values() if j is not None})
    latents = dict(zip(needed, dataset.read(needed), strict=True))
    sentences = [
        ProbeSentence(segments[i].segment_id, segments[i].text, segments[i].language, segments[i].speaker,
                      int(segments[i].n_frames), None if prompts[i] is None else segments[prompts[i]].segment_id,
                      segments[i].emotion, float(segments[i].intensity), int(segments[i].rate),
                      int(segments[i].loudness))
        for i in chosen
    ]
    truth = [np.asarray(latents[i], dtype=np.float32) for i in chosen]
    prompt_latents = [None if prompts[i] is None else np.asarray(latents[prompts[i]], dtype=np.float32)
                      for i in chosen]
    prompt_texts = ["" if prompts[i] is None else segments[prompts[i]].text for i in chosen]
    return ProbeSelection(chosen, sentences, truth, prompt_latents, prompt_texts)


def input_warnings(settings: ProbeSettings, split_languages: set[str], known: set[str], model_languages: Sequence[str],
                   sentences: Sequence[ProbeSentence], vocab: Any) -> list[str]:
    """One line for each thing the probe cannot measure as asked: a ``Probe.languages`` entry
    the split or the recogniser lacks, sentences in a language the model never saw, with
    text outside its vocabulary, or without a prompt."""
    from flowkit.synth.checks import unknown_symbols

    out = []
    recogniser = type(settings.asr).__name__
    for lang in settings.languages:
        if lang not in split_languages:
            out.append(f"Probe.languages: {lang!r} has no segment in the {settings.split!r} split (it holds "
                       f"{', '.join(sorted(split_languages)) or 'none'}); not probed")
        elif lang not in known:
            out.append(f"Probe.languages: the recogniser ({recogniser}) does not know {lang!r} (it knows "
                       f"{', '.join(sorted(known)) or 'none'}); not probed: set Probe.asr to one that does")
    for lang in sorted({s.language for s in sentences} - set(model_languages)):
        out.append(f"Probe: the {lang!r} sentences are in a language the model never saw in training (languages: "
                   f"{', '.join(model_languages) or 'none'}); they are synthesised with the unknown-language condition")
    dumb = []
    for s in sentences:
        unknown, spoken, _ = unknown_symbols(vocab, s.text, s.language)
        if unknown and unknown >= spoken:
            dumb.append(s.segment_id)
    if dumb:
        out.append(f"Probe: {len(dumb)} of {len(sentences)} sentences have no character in the model's vocabulary "
                   f"({', '.join(dumb[:5])}{', ...' if len(dumb) > 5 else ''}): they can only be noise")
    alone = [s.segment_id for s in sentences if s.prompt_id is None]
    if alone:
        out.append(f"Probe: {len(alone)} of {len(sentences)} sentences have no prompt (their speaker has no other clip "
                   f"in the {settings.split!r} split: {', '.join(alone[:5])}{', ...' if len(alone) > 5 else ''}); "
                   "they are synthesised without the voice")
    return out
