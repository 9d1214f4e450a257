"""Synthesising test items with a loaded model: the texts it can speak, batches, per-utterance
noise, long inputs.

Shape legend: n frames, d latent channels.

Batching: ``batch`` consecutive lines of the list are sampled together, padded and masked
(`inference_conditions`). Each utterance's noise is drawn from its own generator, seeded
from ``(seed, utt)``, so an utterance gets the same noise wherever it stands in the list.
With the same ``batch`` the output is bit-identical run to run and across a resume (the
batches are a fixed partition of the list, and a batch cut short by a kill is sampled
again whole); with another ``batch`` the padding changes the sums' order and the audio
agrees to float rounding only. On a CPU one utterance per call is the default: the probe
measured a batch twice as large 3x slower, not 2x (flowkit.train.probe).

Long inputs are handled as `flowkit synthesize` handles them (flowkit.synth.synthesize):
a prompt longer than its MAX_PROMPT_SECONDS is cut at a pause with its text in proportion
(a warning says so; Seed-TTS-eval prompts are 3-10 s), and a target whose speech would make
one piece longer than its MAX_SECONDS (prompt included) is split into pieces at sentence,
clause or word boundaries, generated one after another and joined before the vocoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from flowkit.evaluation.settings import EvalSettings
from flowkit.evaluation.testset import TestItem, TestSet

__all__ = ["Synthesiser", "batches", "check_texts"]


def check_texts(ts: TestSet, vocab: Any) -> tuple[TestSet, list[str]]:
    """``(test set, warnings)``: a line whose target text has no character the model's
    vocabulary knows (another script, only zero-width or control characters) becomes a
    rejection ``text_outside_vocabulary`` (the model could only speak noise, and its score
    would measure nothing); a line with some unknown characters is kept, with a warning
    line naming them (`flowkit.synth.checks.text_warnings`, as synthesize warns)."""
    from flowkit.evaluation.testset import TestRejection
    from flowkit.synth.checks import text_warnings, unknown_symbols

    kept, rejected, warnings = [], list(ts.rejections), []
    for item in ts.items:
        unknown, spoken, missing = unknown_symbols(vocab, item.text, item.language)
        if spoken == 0 or unknown >= spoken:
            shown = "".join(missing[:12]).encode("unicode_escape").decode("ascii")
            rejected.append(TestRejection(
                item.line, item.utt, "text_outside_vocabulary",
                f"none of the characters of its text{f' ({shown})' if shown else ''} is in the model's vocabulary; "
                "the model could only speak noise: give text in the script the model was trained on"))
            continue
        kept.append(item)
        warnings += [f"{ts.path}:{item.line} ({item.utt}): {line}"
                     for line in text_warnings(vocab, item.text, item.language, what="its text")]
    rejected.sort(key=lambda r: r.line)
    return attrs.evolve(ts, items=tuple(kept), rejections=tuple(rejected)), warnings


def batches(items: Sequence[TestItem], size: int) -> list[list[TestItem]]:
    """Consecutive runs of ``size`` items: a fixed partition of the list (a prefix of the
    list, ``--limit``, has the same batches but the last)."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


class Synthesiser:
    """Generates one batch of test items with a loaded model (prompt encoding, per-item noise)."""

    def __init__(self, im: Any, vocoder: Any, settings: EvalSettings) -> None:
        from flowkit import registry

        self.im = im
        self.vocoder = vocoder
        self.settings = settings
        self.encoder = registry.from_record("encoder", dict(im.encoder))
        self.space = list(im.separator_ids)  # the ids of a space (text.vocabs.separator_ids)
        self.prompt_texts: dict[str, str] = {}  # utt -> the prompt text kept with a cut prompt
        self.say: Any = None  # called with a line for each piece of a long target (progress)

    def encode(self, audio: np.ndarray) -> np.ndarray:
        """Raw latents ``[n d]`` of ``audio`` at the encoder's rate, on one BLAS thread: a
        matrix product split over threads sums in another order (log_mel's mel projection
        measured different bits at 1 and 2 threads), and a resumed eval must see the same bits."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1):
            return np.asarray(self.encoder.encode(audio), dtype=np.float32)

    def prompt(self, item: TestItem) -> tuple[tuple[np.ndarray, int], str | None]:
        """``((audio, rate), warning)``: the prompt as the model hears it, mono at the encoder's
        rate, cut as `flowkit synthesize` cuts it (at most its MAX_PROMPT_SECONDS, at a pause,
        the prompt text cut in proportion; `prompt_text` then returns the kept text)."""
        from flowkit.synth.checks import cut_prompt
        from flowkit.synth.synthesize import MAX_PROMPT_SECONDS, load_prompt_audio

        wave, sr = load_prompt_audio(item.prompt_wav, dict(self.im.encoder), max_seconds=86400.0)
        wave, text, cut = cut_prompt(wave, sr, item.prompt_text, MAX_PROMPT_SECONDS, path=item.prompt_wav)
        if cut is not None:
            self.prompt_texts[item.utt] = text
            cut = f"{item.utt}: " + cut.replace("--prompt ", "prompt ", 1).replace("--prompt-text", "its text")
        return (wave, sr), cut

    def prompt_text(self, item: TestItem) -> str:
        """What the prompt the model hears says (its text cut with it, see `prompt`)."""
        return self.prompt_texts.get(item.utt, item.prompt_text)

    def vocode_recording(self, audio: np.ndarray, sr: int) -> tuple[np.ndarray, int]:
        """A recording through the encoder and the run's vocoder (the vocoded ceiling)."""
        from flowkit.synth.level import fit_level

        rate = int(self.im.encoder.get("params", {}).get("sample_rate", sr))
        if sr != rate:
            import soxr

            audio = soxr.resample(audio, sr, rate).astype(np.float32)
        latents = self.encode(audio)
        out, out_sr = self.vocoder(latents, self.im.encoder)
        return fit_level(out, out_sr)[0], out_sr

    def generate(self, batch: Sequence[TestItem], prompts: Sequence[tuple[np.ndarray, int]]) -> list[np.ndarray]:
        """De-normalised latents ``[n_i d]`` of each item's target span."""
        from flowkit.data.labels import emotion_condition, recorded_buckets
        from flowkit.synth.sample import Utterance, inference_conditions, model_prompt
        from flowkit.text.vocabs import encode_text

        im = self.im
        utterances = []
        for item, (wave, wave_sr) in zip(batch, prompts, strict=True):
            raw = self.encode(wave)
            said = self.prompt_text(item)
            rate, loudness = recorded_buckets(wave, wave_sr, said, im.frame_rate, int(raw.shape[0]))
            emotion, intensity = emotion_condition(item.emotion, item.intensity)
            utterances.append(Utterance(
                text=encode_text(im.vocab, item.text, item.language),
                prompt=model_prompt(im.stats, raw),
                prompt_text=encode_text(im.vocab, said, item.language),
                language=im.language_id(item.language),
                emotion=emotion,
                intensity=intensity,
                rate=rate,
                loudness=loudness,
            ))
        cond = inference_conditions(im.model, utterances, separator_ids=self.space)
        lengths = [int(v) for v in cond.frame_mask.sum(dim=1).tolist()]
        if max(lengths) > self.cap_frames:  # a long target: each utterance alone, a long one in pieces
            return [self._alone(item, u, n) for item, u, n in zip(batch, utterances, lengths, strict=True)]
        return self._sample(cond, [f"eval:{item.utt}" for item in batch], lengths)

    @property
    def cap_frames(self) -> int:
        """The longest piece of speech, prompt included, in frames (synthesize's MAX_SECONDS)."""
        from flowkit.synth.synthesize import MAX_SECONDS

        return int(MAX_SECONDS * self.im.frame_rate)

    def _sample(self, cond: Any, streams: Sequence[str], lengths: Sequence[int]) -> list[np.ndarray]:
        """Integrate the flow for ``cond``, item i from the noise of its own stream ``streams[i]``."""
        import torch

        from flowkit.synth.sample import generated_latents, synthesize
        from flowkit.train.randomness import derive_seed

        im = self.im
        b, n = cond.frame_mask.shape
        noise = torch.zeros((b, n, im.model.latent_dim), dtype=torch.float32)
        for i, stream in enumerate(streams):
            generator = torch.Generator().manual_seed(derive_seed(self.settings.seed, stream))
            noise[i, : lengths[i]] = torch.randn((lengths[i], im.model.latent_dim), generator=generator)
        latents = synthesize(im.model, cond, schedule=im.schedule, solver=im.solver, steps=self.settings.nfe,
                             cfg_strength=self.settings.cfg, noise=noise)
        return generated_latents(latents, cond, im.stats)

    def _alone(self, item: TestItem, utterance: Any, frames: int) -> np.ndarray:
        """One utterance by itself: whole when it fits in one piece of speech, else its text
        split as `flowkit synthesize` splits it (`split_text`, by the whole text's frames per
        character), piece k drawn from the noise stream ``eval:<utt>:<k>``, the pieces' latents
        joined in order."""
        import attrs as _attrs

        from flowkit.synth.sample import inference_conditions
        from flowkit.synth.synthesize import MAX_SECONDS, split_text
        from flowkit.text.vocabs import encode_text

        def conditions(u: Any) -> tuple[Any, int]:
            cond = inference_conditions(self.im.model, [u], separator_ids=self.space)
            return cond, int(cond.frame_mask.sum())

        if frames <= self.cap_frames:
            cond, n = conditions(utterance)
            return self._sample(cond, [f"eval:{item.utt}"], [n])[0]
        n_prompt = 0 if utterance.prompt is None else int(utterance.prompt.shape[0])
        per_char = (frames - n_prompt) / max(len(item.text.strip()), 1)
        pieces = split_text(item.text, lambda piece: n_prompt + per_char * len(piece) <= self.cap_frames,
                            f"{MAX_SECONDS:g} s a piece, the prompt's {n_prompt / self.im.frame_rate:.1f} s included")
        out = []
        for k, piece in enumerate(pieces):
            if self.say is not None:
                self.say(f"{item.utt}: about {(frames - n_prompt) / self.im.frame_rate:.0f} s of speech, more than "
                         f"one piece ({MAX_SECONDS:g} s, prompt included): piece {k + 1}/{len(pieces)}")
            cond, n = conditions(_attrs.evolve(utterance, text=encode_text(self.im.vocab, piece, item.language)))
            out.append(self._sample(cond, [f"eval:{item.utt}:{k}"], [n])[0])
        return np.concatenate(out, axis=0)
