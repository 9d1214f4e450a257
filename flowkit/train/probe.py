"""The intelligibility probe: does the model say the words? Measured while it trains.

Shape legend: n frames, d latent channels.

Every ``Probe.every`` steps, on rank 0, the probe synthesises a fixed set of sentences
with the EMA weights — the run's solver and vocoder, CFG as the report samples use it —,
transcribes them with an ``asr`` plugin and logs, per language the recogniser knows,
``probe_wer/<lang>`` and ``probe_cer/<lang>`` (and ``probe_wer``/``probe_cer``: over all
its sentences) in a ``kind: "probe"`` record of ``metrics.jsonl``. The same record holds
``probe_text_gain``: the flow loss on the probe sentences without their text minus with
it (fixed t and noise, EMA weights): above zero when the model uses the text.

The judges are plugins, named in every record (``judges``: name, model and package
version of each): the recogniser is ``Probe.asr`` (default:
`flowkit.asr.choice.default_recognizer`, Whisper when ``flowkit[eval]`` is installed,
pocketsphinx otherwise); ``Probe.speaker`` (default ``speaker.resemblyzer``) gives
``probe_sim``, the cosine similarity of the generated speech to its prompt's recording
(F5-TTS's SIM-o), and ``probe_sim_ref``, to the sentence's own recording; ``Probe.quality``
(default ``quality.dnsmos``) gives ``probe_dnsmos`` (DNSMOS P.835 OVRL) with
``probe_dnsmos_sig`` and ``probe_dnsmos_bak``, of the first noise draw's sentences. A
default judge whose package is missing is left out with one line naming the extra.

Once per run (at its start) a ``kind: "probe_ceiling"`` record gives what a model can
reach on the same sentences: ``probe_truth_raw_wer`` (the recorded audio, when
``Probe.audio_dirs`` holds it) and ``probe_truth_vocoded_wer`` (the ground-truth latents
through the run's vocoder), per language like the probe's own, and the same two for
``sim`` and ``dnsmos`` (``probe_truth_raw_sim``: the sentence's recording against its
prompt's, ...).

What is fixed: the sentences (spread evenly over the split, per language, at most
``sentences`` each), each one's prompt (the next chosen sentence of the same speaker
that is at most 300 frames long, whole, with its text), the target length (the
sentence's own frames) and its labels (the emotion, rate and loudness buckets it was
recorded with: the model was trained on them, never on "unknown"), the noise (a generator
derived from the run's seed; draw k of ``Probe.draws`` from that seed + k), t and noise of
the text-gain loss. So two probes of the same weights give the same numbers, and the
probe never draws from the training streams: it runs inside a guard that restores the
global Python, numpy and torch generators, which is what keeps a resume bit-identical
with the probe on. Its time is logged as ``probe_s`` (a wall-clock field).

F5-TTS scores WER offline with Whisper after training (Chen et al. 2024, section 4);
scoring during training is flowkit's.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import gin
import numpy as np

from flowkit.errors import ConfigError

__all__ = ["PROBE_SPLITS", "ProbeRunner", "ProbeSentence", "ProbeSettings"]

PROBE_SPLITS = ("val", "train")
MAX_PROMPT_FRAMES = 300  # 3 s at 100 Hz: enough to carry the voice, cheap on a CPU
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")


AUTO = "auto"  # Probe.speaker / Probe.quality: the installed default judge, else none


def _speaker_judge(value: Any) -> tuple[Any, str | None]:
    """The speaker judge ``Probe.speaker`` names, and the line to print when "auto" finds none."""
    if value != AUTO:
        return value, None
    from flowkit.judges import default_speaker_judge, unavailable

    judge = default_speaker_judge()
    return judge, None if judge is not None else f"no probe_sim: {unavailable('speaker')}"


def _quality_judge(value: Any) -> tuple[Any, str | None]:
    """The quality judge ``Probe.quality`` names, and the line to print when "auto" finds none."""
    if value != AUTO:
        return value, None
    from flowkit.judges import default_quality_judge, unavailable

    judge = default_quality_judge()
    return judge, None if judge is not None else f"no probe_dnsmos: {unavailable('quality')}"


def describe_judge(judge: Any) -> dict[str, Any] | None:
    """``judge.describe()`` (name, model, version); a judge without one is named by its type."""
    if judge is None:
        return None
    describe = getattr(judge, "describe", None)
    if callable(describe):
        return dict(describe())
    return {"name": type(judge).__name__, "model": "unknown", "version": "unknown"}


def _positive(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value < 1:
        raise ConfigError(f"Probe.{attribute.name} = {value!r} must be >= 1; fix it in the gin file or -b binding")


@gin.configurable("Probe")
@attrs.frozen
class ProbeSettings:
    """What the intelligibility probe synthesises and how it scores it (gin: ``Probe.<field>``).

    Turned on by ``Trainer.probe = @Probe()``; every field may change on resume (the probe
    does not touch training).

    Args:
        every: steps between probes (also at step 0 and at the last step).
        asr: the recogniser (``@asr.whisper()``, ``@asr.pocketsphinx()``); None =
            `flowkit.asr.choice.default_recognizer` (Whisper when installed, with one line
            when it falls back to pocketsphinx).
        speaker: the speaker-similarity judge for ``probe_sim``; "auto" =
            ``speaker.resemblyzer`` when installed (else none, with one line); None = none.
        quality: the quality judge for ``probe_dnsmos``; "auto" = ``quality.dnsmos`` when
            installed (else none, with one line); None = none.
        sentences: probe sentences per language (spread evenly over the split).
        split: "val" (held-out sentences) or "train" (memorisation, gin/memorise.gin).
        languages: languages to probe; empty = every language of the split the recogniser knows.
        solver_steps: ODE steps of the run's solver (F5-TTS samples with 32).
        cfg_strength: classifier-free guidance strength (F5-TTS: 2.0).
        vocoder: latents -> audio; None = the run's (``Trainer.vocoder`` where a run has
            one, else ``vocoder.griffin_lim``).
        audio_dirs: folders holding the recorded ``<segment_id>.{wav,flac,ogg}`` for the raw
            ceiling, searched before the bundled demo clips; sentences found nowhere are left
            out of it (``probe_truth_raw_items`` counts the ones scored).
        seed: added to the run's seed for the probe's noise.
        draws: noise draws per sentence; the WER and CER pool every draw's transcript. On 16
            sentences (about 100 words) one draw's WER moves by up to 0.06 from one noise
            seed to the next, so a run judged against a bar (gin/memorise.gin) takes 2.
            The report's audio and hypotheses are the first draw's.

    Raises:
        ConfigError: a value out of range, naming ``Probe.<field>``.
    """

    every: int = attrs.field(default=200, validator=_positive)
    asr: Any = None
    speaker: Any = AUTO
    quality: Any = AUTO
    sentences: int = attrs.field(default=8, validator=_positive)
    split: str = "val"
    languages: Sequence[str] = ()
    solver_steps: int = attrs.field(default=32, validator=_positive)
    cfg_strength: float = 2.0
    vocoder: Any = None
    audio_dirs: Sequence[str] = ()
    seed: int = 0
    draws: int = attrs.field(default=1, validator=_positive)
    #: lines the probe prints once: a default judge that was not available
    notes: tuple[str, ...] = attrs.field(default=(), init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        notes = []
        if self.asr is None:
            from flowkit.asr.choice import default_recognizer, whisper_unavailable

            object.__setattr__(self, "asr", default_recognizer())
            reason = whisper_unavailable()
            if reason is not None:
                notes.append(f"judging with asr.pocketsphinx ({reason})")
        speaker, note_s = _speaker_judge(self.speaker)
        quality, note_q = _quality_judge(self.quality)
        object.__setattr__(self, "speaker", speaker)
        object.__setattr__(self, "quality", quality)
        object.__setattr__(self, "notes", tuple(n for n in (*notes, note_s, note_q) if n))
        if self.speaker is not None and not hasattr(self.speaker, "similarity"):
            raise ConfigError(f"Probe.speaker = {self.speaker!r} is not a speaker judge; use @speaker.resemblyzer() or None")
        if self.quality is not None and not hasattr(self.quality, "score"):
            raise ConfigError(f"Probe.quality = {self.quality!r} is not a quality judge; use @quality.dnsmos() or None")
        if self.split not in PROBE_SPLITS:
            raise ConfigError(f"Probe.split = {self.split!r} is not one of {', '.join(map(repr, PROBE_SPLITS))}")
        if self.cfg_strength < 0:
            raise ConfigError(f"Probe.cfg_strength = {self.cfg_strength!r} must be >= 0 (F5-TTS uses 2.0)")
        if not hasattr(self.asr, "transcribe"):
            raise ConfigError(f"Probe.asr = {self.asr!r} is not a recogniser; use e.g. @asr.pocketsphinx()")


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


def _choose(n_items: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``n_items`` (all when there are fewer)."""
    if k >= n_items:
        return list(range(n_items))
    return sorted({int(round(i * (n_items - 1) / max(k - 1, 1))) for i in range(k)})


def _bundled_audio() -> list[str]:
    """The bundled demo recordings' folder (the demo store's raw audio), when installed."""
    from flowkit.data.demo import demo_clips_path
    from flowkit.errors import DataError

    try:
        return [str(demo_clips_path() / "wavs")]
    except DataError:
        return []


def _find_audio(dirs: Sequence[str], segment_id: str) -> Path | None:
    for folder in dirs:
        for suffix in AUDIO_SUFFIXES:
            path = Path(folder) / f"{segment_id}{suffix}"
            if path.is_file():
                return path
    return None


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


def _announce(what: str, asr: Any) -> None:
    """One line as a probe starts (through flowkit.console, so it lands above the progress
    bar): a step-0 probe and its ceiling take ~100 s on a loaded CPU and look like a hang."""
    from flowkit.console import console

    describe = getattr(asr, "describe", None)
    name = describe().get("name") if callable(describe) else type(asr).__name__
    console.print(f"probe: {what}, transcribed by {name} ...", markup=False, highlight=False, soft_wrap=True)


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
        self.sentences = [
            ProbeSentence(segments[i].segment_id, segments[i].text, segments[i].language, segments[i].speaker,
                          int(segments[i].n_frames), None if prompts[i] is None else segments[prompts[i]].segment_id,
                          segments[i].emotion, float(segments[i].intensity), int(segments[i].rate),
                          int(segments[i].loudness))
            for i in chosen
        ]
        self._truth = [np.asarray(latents[i], dtype=np.float32) for i in chosen]
        self._prompts = [None if prompts[i] is None else np.asarray(latents[prompts[i]], dtype=np.float32)
                         for i in chosen]
        self._prompt_texts = ["" if prompts[i] is None else segments[prompts[i]].text for i in chosen]
        self.warnings = input_warnings(settings, {seg.language for seg in segments}, known, self.languages,
                                       self.sentences, vocab)
        if self.warnings:
            from flowkit.console import err_console

            for line in self.warnings:
                err_console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)
        self.last_hypotheses: list[str] = []
        self.last_audio: list[tuple[np.ndarray, int]] = []
        self.last_sim: list[float | None] = []
        self.last_dnsmos: list[float | None] = []
        self.judges = {kind: describe_judge(getattr(settings, kind)) for kind in ("asr", "speaker", "quality")}
        self._audio_dirs = [*settings.audio_dirs, *_bundled_audio()]
        self._recordings: dict[str, tuple[np.ndarray, int] | None] = {}
        self._references: dict[tuple[str, int], np.ndarray | None] = {}
        if settings.notes:
            from flowkit.console import console

            for note in settings.notes:
                console.print(f"probe: {note}", markup=False, highlight=False, soft_wrap=True)
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

    def _utterances(self) -> list[Any]:
        from flowkit.synth.sample import Utterance, recorded_labels

        out = []
        for s, prompt, prompt_text in zip(self.sentences, self._prompts, self._prompt_texts, strict=True):
            out.append(Utterance(
                text=self.vocab.encode(s.text),
                prompt=None if prompt is None else np.asarray(self.stats.normalize(prompt), dtype=np.float32),
                prompt_text=self.vocab.encode(prompt_text) if prompt is not None else (),
                target_frames=s.n_frames,
                language=self.languages.index(s.language) + 1 if s.language in self.languages else 0,
                **recorded_labels(s),
            ))
        return out

    def _score(self, audios: Sequence[tuple[np.ndarray, int]], prefix: str,
               subset: Sequence[int] | None = None) -> tuple[dict[str, float], list[str]]:
        """Transcribe ``audios`` (aligned with ``subset`` of the sentences) and score per language."""
        from flowkit.asr.scoring import error_rates

        index = list(range(len(self.sentences))) if subset is None else list(subset)
        hyps = [self.settings.asr.transcribe(audio, sr, self.sentences[i].language)
                for i, (audio, sr) in zip(index, audios, strict=True)]
        out: dict[str, float] = {}
        langs = sorted({self.sentences[i].language for i in index})
        edits_w = words = edits_c = chars = 0.0
        for lang in langs:
            pos = [k for k, i in enumerate(index) if self.sentences[i].language == lang]
            rates = error_rates([self.sentences[index[k]].text for k in pos], [hyps[k] for k in pos], lang)
            out[f"{prefix}_wer/{lang}"] = rates.wer
            out[f"{prefix}_cer/{lang}"] = rates.cer
            edits_w += rates.wer * rates.words
            words += rates.words
            edits_c += rates.cer * rates.chars
            chars += rates.chars
        out[f"{prefix}_wer"] = edits_w / max(words, 1.0)
        out[f"{prefix}_cer"] = edits_c / max(chars, 1.0)
        return out, hyps

    def _recording(self, segment_id: str) -> tuple[np.ndarray, int] | None:
        """The recorded audio of ``segment_id`` (`Probe.audio_dirs`, then the demo clips), read once."""
        if segment_id not in self._recordings:
            import soundfile as sf

            path = _find_audio(self._audio_dirs, segment_id)
            found = None
            if path is not None:
                audio, sr = sf.read(str(path), dtype="float32", always_2d=False)
                found = (audio, int(sr))
            self._recordings[segment_id] = found
        return self._recordings[segment_id]

    def _reference(self, what: str, i: int) -> np.ndarray | None:
        """Speaker embedding of sentence ``i``'s prompt (``what="prompt"``: its recording, else
        its latents through the vocoder) or of its own recording (``"ref"``); None without one."""
        key = (what, i)
        if key not in self._references:
            s, audio = self.sentences[i], None
            if what == "ref":
                audio = self._recording(s.segment_id)
            elif s.prompt_id is not None:
                audio = self._recording(s.prompt_id)
                if audio is None and self._prompts[i] is not None:
                    audio = self.vocoder(self._prompts[i], self.encoder)
            self._references[key] = None if audio is None else self.settings.speaker.embed(*audio)
        return self._references[key]

    def _judge(self, audios: Sequence[tuple[np.ndarray, int]], prefix: str, index: Sequence[int],
               with_ref: bool = True, rated: int | None = None
               ) -> tuple[dict[str, float], list[float | None], list[float | None]]:
        """Speaker similarity and quality of ``audios`` (sentences ``index``): ``<prefix>_sim``
        (to the prompt), ``<prefix>_sim_ref`` (to the sentence's recording, when ``with_ref``),
        means over the clips, and ``<prefix>_dnsmos`` (OVRL) with ``_sig``/``_bak``, means over
        the first ``rated`` clips (None: all); and each clip's similarity to its prompt and
        OVRL (None where not judged)."""
        from flowkit.judges.speaker import cosine

        out: dict[str, float] = {}
        n = len(audios)
        sims: list[float | None] = [None] * n
        ovrl: list[float | None] = [None] * n
        speaker, quality = self.settings.speaker, self.settings.quality
        if speaker is not None:
            refs = []
            for k, ((audio, sr), i) in enumerate(zip(audios, index, strict=True)):
                emb = speaker.embed(audio, sr)
                prompt = self._reference("prompt", i)
                if prompt is not None:
                    sims[k] = cosine(emb, prompt)
                ref = self._reference("ref", i) if with_ref else None
                if ref is not None:
                    refs.append(cosine(emb, ref))
            judged = [v for v in sims if v is not None]
            if judged:
                out[f"{prefix}_sim"] = float(np.mean(judged))
            if refs:
                out[f"{prefix}_sim_ref"] = float(np.mean(refs))
        if quality is not None and n:
            scores = [quality.score(audio, sr) for audio, sr in audios[:rated]]
            ovrl[:len(scores)] = [float(q["ovrl"]) for q in scores]
            for key, name in (("ovrl", "dnsmos"), ("sig", "dnsmos_sig"), ("bak", "dnsmos_bak")):
                out[f"{prefix}_{name}"] = float(np.mean([q[key] for q in scores]))
        return out, sims, ovrl

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
        _announce(f"the ceiling: {len(self.sentences)} sentences' ground truth through the vocoder and as recorded", self.settings.asr)
        with isolated_global_rng():
            vocoded = [self.vocoder(truth, self.encoder) for truth in self._truth]
            out, _ = self._score(vocoded, "probe_truth_vocoded")
            out.update(self._judge(vocoded, "probe_truth_vocoded", range(len(vocoded)))[0])
            raw, found = [], []
            for i, s in enumerate(self.sentences):
                recording = self._recording(s.segment_id)
                if recording is not None:
                    raw.append(recording)
                    found.append(i)
            if found:
                values, _ = self._score(raw, "probe_truth_raw", found)
                out.update(values)
                out.update(self._judge(raw, "probe_truth_raw", found, with_ref=False)[0])
            out["probe_truth_raw_items"] = len(found)
        out["probe_sentences"] = len(self.sentences)
        out["judges"] = self.judges
        out["probe_s"] = time.perf_counter() - started
        return out

    def probe(self, model: Any, ema: Any = None) -> dict[str, Any]:
        """The ``probe`` values for the EMA weights of ``ema`` swapped into ``model`` (``model``
        left as it was); ``ema=None`` probes the weights ``model`` holds."""
        import torch

        from flowkit.synth.sample import inference_conditions, synthesize, target_spans

        started = time.perf_counter()
        _announce(f"synthesising {len(self.sentences)} sentences x {self.settings.draws} draw(s)", self.settings.asr)
        was_training = model.training
        weights = ema.swapped_in(model) if ema is not None else contextlib.nullcontext()
        with isolated_global_rng(), torch.no_grad(), weights:
            model.eval()
            try:
                space = [i for i in self.vocab.encode(" ") if i > 1]
                cond = inference_conditions(model, self._utterances(), separator_ids=space)
                spans = []
                # One batch per draw (draw k's noise from seed + k, so draw 0 is the one-draw
                # probe): a batch twice as large measured 3x slower on the CPU, not 2x.
                for k in range(self.settings.draws):
                    latents = synthesize(model, cond, schedule=self.schedule, solver=self.solver,
                                         steps=self.settings.solver_steps, cfg_strength=self.settings.cfg_strength,
                                         generator=torch.Generator().manual_seed(self.seed + k))
                    spans += [np.asarray(self.stats.denormalize(s.float().cpu().numpy()), dtype=np.float32)
                              for s in target_spans(latents, cond)]
                gain = self._text_gain(model)
            finally:
                model.train(was_training)
            audios = [self.vocoder(span, self.encoder) for span in spans]
            n = len(self.sentences)
            out, hyps = self._score(audios, "probe", list(range(n)) * self.settings.draws)
            # DNSMOS of the first draw only: ~1.9 CPU-s per short clip (its 9 s windows of the
            # clip repeated), the costliest judge; SIM pools every draw as WER does (0.06 CPU-s)
            judged, sims, ovrl = self._judge(audios, "probe", list(range(n)) * self.settings.draws, rated=n)
            out.update(judged)
        self.last_hypotheses = hyps[:n]
        self.last_audio = audios[:n]
        self.last_sim, self.last_dnsmos = sims[:n], ovrl[:n]
        if gain is not None:
            out["probe_text_gain"] = gain
        out["judges"] = self.judges
        out["probe_s"] = time.perf_counter() - started
        return out

    @staticmethod
    def improves(wer: float, best_folder: Path) -> bool:
        """Whether ``wer`` is below the WER kept in ``best_folder`` (True when there is none)."""
        import json

        try:
            kept = json.loads((Path(best_folder) / "sentences.json").read_text(encoding="utf-8"))["values"]["probe_wer"]
        except (OSError, ValueError, KeyError, TypeError):
            return True
        return wer < float(kept)

    def sentence_table(self) -> list[dict[str, Any]]:
        """The probe sentences with the last probe's hypotheses (for the report)."""
        def last(values: list[Any], i: int) -> Any:
            return values[i] if i < len(values) else None

        return [
            {"segment_id": s.segment_id, "language": s.language, "reference": s.text, "prompt": s.prompt_id,
             "hypothesis": last(self.last_hypotheses, i), "sim": last(self.last_sim, i),
             "dnsmos": last(self.last_dnsmos, i)}
            for i, s in enumerate(self.sentences)
        ]


def write_probe_outputs(folder: Path, step: int, values: dict[str, Any], runner: ProbeRunner) -> None:
    """Replace ``folder`` with the last probe's sentences (``sentences.json``) and audio
    (``<segment_id>.wav``): what the report lists for the latest and the best probe.

    The new folder is written beside the old one and swapped in by renames, so a kill leaves
    one complete version.
    """
    import json
    import shutil

    from flowkit.synth.wav import wav_bytes

    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    rows = runner.sentence_table()
    for row, (audio, sr) in zip(rows, runner.last_audio, strict=False):
        name = f"{row['segment_id']}.wav"
        (tmp / name).write_bytes(wav_bytes(audio, sr))
        row["audio"] = name
    doc = {"step": step, "values": {k: v for k, v in values.items() if k != "probe_s"}, "sentences": rows}
    (tmp / "sentences.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
