"""`ProbeRunner`: the probe of one run, its two records (``probe_ceiling``, ``probe``).

Shape legend: n frames, d latent channels.

See `flowkit.train.probe` for what is measured and what is fixed. The probe never draws
from the training streams: it runs inside `isolated_global_rng`, which restores the global
Python, numpy and torch generators, so a resume stays bit-identical with the probe on.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowkit.train.probe.ceilings import Recordings, ceiling_values
from flowkit.train.probe.judging import ProbeJudges
from flowkit.train.probe.sentences import input_warnings, select_sentences
from flowkit.train.probe.settings import ProbeSettings

__all__ = ["ProbeRunner", "isolated_global_rng"]


@contextlib.contextmanager
def isolated_global_rng() -> Iterator[None]:
    """Run a block without disturbing the global Python, numpy and torch generators."""
    import torch

    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


def _announce(what: str, judges: Any) -> None:
    """One line as a probe starts (through flowkit.console, so it lands above the progress
    bar): a step-0 probe and its ceiling take ~100 s on a loaded CPU and look like a hang."""
    from flowkit.console import console

    found = judges.describe()["asr"]
    heard = f"transcribed by {found['name']}" if found else "no recogniser (it is off)"
    console.print(f"probe: {what}, {heard} ...", markup=False, highlight=False, soft_wrap=True)


class ProbeRunner:
    """Runs the probe of one run (see the module docstring); built by `flowkit.train.run`.

    Args:
        settings: the `ProbeSettings`.
        dataset: a `LatentDataset` of the probe's split (read once, at construction).
        stats, vocab, languages: the run's latent stats, text vocabulary and language list.
        schedule, solver: the run's components; vocoder: the resolved vocoder.
        encoder: the store's encoder record (for the vocoder).
        run_seed: ``Trainer.seed``; device: where the model lives.
        builder: the run's `BatchBuilder` over ``dataset`` for ``probe_text_gain``; None
            leaves the text gain out.

    Raises:
        ConfigError: the split holds no sentence in a language the recogniser knows.
    """

    def __init__(self, settings: ProbeSettings, dataset: Any, *, stats: Any, vocab: Any, languages: Sequence[str],
                 schedule: Any, solver: Any, vocoder: Any, encoder: dict[str, Any], run_seed: int,
                 device: Any, builder: Any = None) -> None:
        from flowkit.train.randomness import derive_seed

        self.settings = settings
        self.stats = stats
        self.vocab = vocab
        self.languages = list(languages)
        self.schedule = schedule
        self.solver = solver
        self.vocoder = vocoder
        self.encoder = encoder
        self.device = device
        self.seed = derive_seed(run_seed + settings.seed, "probe")
        known = set(getattr(settings.asr, "languages", ()) or ())
        picked = select_sentences(settings, dataset, known)
        chosen = picked.indices
        self.sentences = picked.sentences
        self._truth, self._prompts, self._prompt_texts = picked.truth, picked.prompts, picked.prompt_texts
        segments = dataset.segments
        self.warnings = input_warnings(settings, {seg.language for seg in segments}, known, self.languages,
                                       self.sentences, vocab)
        if self.warnings:
            from flowkit.console import err_console

            for line in self.warnings:
                err_console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)
        self.last_hypotheses: list[str | None] = []  # the last probe's first draw, one per sentence
        self.last_audio: list[tuple[np.ndarray, int]] = []
        self.last_records: list[dict[str, Any]] = []  # flowkit.judges.records records of that draw
        self._recordings = Recordings(settings.audio_dirs)
        self._judges = ProbeJudges(settings.judges, self.sentences, self._prompts, self._recordings, vocoder, encoder)
        self._said = 0  # the panel's notes printed so far
        self._say_notes()
        # The text gain is measured as training sees the sentences: the run's pairing (a target
        # span, the rest of the clip as prompt) and, on the aligned path, the true unit timings.
        self._gain_batch = None
        if builder is not None:
            import torch

            batch, _ = builder.build(chosen, np.random.default_rng(self.seed), train=False)
            generator = torch.Generator().manual_seed(self.seed + 1)
            t = torch.rand((batch.x1.shape[0],), generator=generator)
            self._gain_batch = (batch, t, torch.randn(batch.x1.shape, generator=generator))

    # ---- pieces ----

    @property
    def judges(self) -> dict[str, Any]:
        """Each judge's `flowkit.judges.panel.describe` (None: off), as every record names them."""
        return self.settings.judges.describe()

    def _say_notes(self) -> None:
        """Print the panel's notes not printed yet (a default judge not available, or one that
        failed on first use and is off from then on)."""
        from flowkit.console import console

        notes = self.settings.judges.notes
        for note in notes[self._said:]:
            console.print(f"probe: {note}", markup=False, highlight=False, soft_wrap=True)
        self._said = len(notes)

    def _utterances(self) -> list[Any]:
        from flowkit.synth.sample import Utterance, model_prompt, recorded_labels

        out = []
        for s, prompt, prompt_text in zip(self.sentences, self._prompts, self._prompt_texts, strict=True):
            out.append(Utterance(
                text=self.vocab.encode(s.text),
                prompt=model_prompt(self.stats, prompt),
                prompt_text=self.vocab.encode(prompt_text) if prompt is not None else (),
                target_frames=s.n_frames,
                language=self.languages.index(s.language) + 1 if s.language in self.languages else 0,
                **recorded_labels(s),
            ))
        return out

    def _text_gain(self, model: Any) -> float | None:
        """EMA flow loss without text minus with text on the probe sentences (fixed spans, t
        and noise; the model's training-time conditioning), or None without a builder."""
        if self._gain_batch is None:
            return None
        import torch

        from flowkit.losses import MaskedMSE
        from flowkit.train.objective import loss_terms

        cpu_batch, t, x0 = self._gain_batch
        batch = cpu_batch.to(self.device)
        losses = []
        for drop in (False, True):
            cond = batch.cond.replace(drop_text=torch.full_like(batch.cond.drop_text, drop))
            (term, *_), _ = loss_terms(model, self.schedule, [MaskedMSE()], ["masked_mse"], batch.x1, cond, t, x0,
                                       autocast=False)
            losses.append(float(term.term.value))
        return losses[1] - losses[0]

    # ---- the two records ----

    def ceilings(self) -> dict[str, Any]:
        """The ``probe_ceiling`` values: WER/CER, SIM and DNSMOS of the ground truth, vocoded
        and raw, and the ``judges`` that scored them."""
        started = time.perf_counter()
        _announce(f"the ceiling: {len(self.sentences)} sentences' ground truth through the vocoder and as recorded",
                  self.settings.judges)
        with isolated_global_rng():
            out = ceiling_values(self._judges, self._recordings, self.sentences, self._truth, self.vocoder,
                                 self.encoder)
        self._say_notes()
        out["probe_sentences"] = len(self.sentences)
        out["judges"] = self.judges
        out["probe_s"] = time.perf_counter() - started
        return out

    def probe(self, model: Any, ema: Any = None) -> dict[str, Any]:
        """The ``probe`` values for the EMA weights of ``ema`` swapped into ``model`` (``model``
        left as it was); ``ema=None`` probes the weights ``model`` holds."""
        import torch

        from flowkit.synth.sample import generated_latents, inference_conditions, synthesize
        from flowkit.text.vocabs import separator_ids

        started = time.perf_counter()
        _announce(f"synthesising {len(self.sentences)} sentences x {self.settings.draws} draw(s)", self.settings.judges)
        was_training = model.training
        weights = ema.swapped_in(model) if ema is not None else contextlib.nullcontext()
        with isolated_global_rng(), torch.no_grad(), weights:
            model.eval()
            try:
                cond = inference_conditions(model, self._utterances(), separator_ids=separator_ids(self.vocab))
                spans = []
                # One batch per draw (draw k's noise from seed + k, so draw 0 is the one-draw
                # probe): a batch twice as large measured 3x slower on the CPU, not 2x.
                for k in range(self.settings.draws):
                    latents = synthesize(model, cond, schedule=self.schedule, solver=self.solver,
                                         steps=self.settings.solver_steps, cfg_strength=self.settings.cfg_strength,
                                         generator=torch.Generator().manual_seed(self.seed + k))
                    spans += generated_latents(latents, cond, self.stats)
                gain = self._text_gain(model)
            finally:
                model.train(was_training)
            audios = [self.vocoder(span, self.encoder) for span in spans]
            n = len(self.sentences)
            out, hyps = self._judges.score(audios, "probe", list(range(n)) * self.settings.draws)
            # DNSMOS of the first draw only: ~1.9 CPU-s per short clip (its 9 s windows of the
            # clip repeated), the costliest judge; SIM pools every draw as WER does (0.06 CPU-s)
            judged, clips = self._judges.judge(audios, "probe", list(range(n)) * self.settings.draws, rated=n)
            out.update(judged)
        self.last_hypotheses = hyps[:n]
        self.last_audio = audios[:n]
        self.last_records = self._records(hyps[:n], clips[:n], audios[:n])
        self._say_notes()
        if gain is not None:
            out["probe_text_gain"] = gain
        out["judges"] = self.judges
        out["probe_s"] = time.perf_counter() - started
        return out

    def _records(self, hyps: list[str | None], clips: list[dict[str, Any]],
                 audios: list[tuple[np.ndarray, int]]) -> list[dict[str, Any]]:
        """One `flowkit.judges.records` record per sentence (its first draw), with the
        sentence's segment, its prompt's segment and the clip's length in seconds."""
        from flowkit.judges.records import clip_record

        return [
            {"utt": s.segment_id, "text": s.text, "language": s.language, "prompt": s.prompt_id,
             "seconds": round(audio.shape[0] / sr, 4),
             **clip_record(self.settings.judges, s.text, s.language, hyp, clip["sim"], clip["sim_target"],
                           clip["quality"])}
            for s, hyp, clip, (audio, sr) in zip(self.sentences, hyps, clips, audios, strict=True)
        ]

    @staticmethod
    def improves(wer: float | None, best_folder: Path, asr: dict[str, Any] | None = None) -> bool:
        """Whether a probe with ``wer``, heard by ``asr`` (its `describe`), replaces the best kept
        in ``best_folder``: True when none is kept, when the kept one has no WER, or when another
        recogniser heard it (WERs of two recognisers are not comparable); False without a
        ``wer``; else whether ``wer`` is lower."""
        import json

        from flowkit.judges.records import SUMMARY

        try:
            kept = json.loads((Path(best_folder) / SUMMARY).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return True
        if wer is None:
            return False
        kept = kept if isinstance(kept, dict) else {}
        values = kept.get("values") if isinstance(kept.get("values"), dict) else {}
        kept_wer = values.get("probe_wer")
        kept_asr = (kept.get("judges") or {}).get("asr") if isinstance(kept.get("judges"), dict) else None

        def named(judge: Any) -> tuple[Any, Any]:
            return (judge.get("name"), judge.get("model")) if isinstance(judge, dict) else (None, None)

        if not isinstance(kept_wer, (int, float)) or (asr is not None and named(asr) != named(kept_asr)):
            return True
        return wer < float(kept_wer)
