"""`evaluate`: synthesise a test list with a checkpoint, judge every utterance, write the results.

Shape legend: n frames, d latent channels.

The loop, top to bottom: load the model (`flowkit.synth.inference.load_inference_model`:
the run's schedule, solver with its sway, vocoder), read the test list
(`flowkit.evaluation.testset`: bad lines become ``rejections.jsonl``), build the judges
(`flowkit.evaluation.judges`), skip what ``results.jsonl`` already holds, then per batch:
encode each prompt, build the conditions (`flowkit.synth.sample.inference_conditions`:
the target length from the duration head on the aligned path, else the prompt's frames
per character, as F5-TTS estimates it), integrate the flow from each utterance's own
noise, vocode, write the WAV atomically, judge it and append its line to
``results.jsonl``. At the end: totals (`totals`), ``summary.json``, ``eval.md`` and
``eval.html`` (`flowkit.evaluation.render`).

Batching: ``batch`` consecutive lines of the list are sampled together, padded and masked
(`inference_conditions`). Each utterance's noise is drawn from its own generator, seeded
from ``(seed, utt)``, so an utterance gets the same noise wherever it stands in the list.
With the same ``batch`` the output is bit-identical run to run and across a resume (the
batches are a fixed partition of the list, and a batch cut short by a kill is sampled
again whole); with another ``batch`` the padding changes the sums' order and the audio
agrees to float rounding only. On a CPU one utterance per call is the default: the probe
measured a batch twice as large 3x slower, not 2x (flowkit.train.probe).

Resume: ``results.jsonl`` is append-only, one line per finished utterance, written after
its WAV (temp file, rename); a torn last line is dropped on start and finished utterances
are skipped, so a killed eval run again with the same command ends with the same
``results.jsonl`` as one never interrupted. ``eval.json`` records what the results depend
on (checkpoint, test list digest, seed, NFE, CFG, batch, judges, vocoder); another value
is refused with the field named. ``--limit`` may change between runs.

Scores per utterance: WER and CER of the recogniser's transcript against the target text
(`flowkit.asr.scoring`, both sides normalised), SIM (speaker similarity of the generated
audio to the prompt, and ``sim_target`` to the target recording), DNSMOS (OVRL, SIG, BAK)
and the duration ratio (generated seconds / target recording seconds). Where the line has
a target recording and ``ceilings`` is on, the same judges score the recording itself
(``truth``) and the recording encoded and decoded by the run's vocoder (``vocoded``): what
a perfect model could reach through this vocoder.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError, DataError, ResumeError
from flowkit.evaluation.judges import Judges, build_judges
from flowkit.evaluation.testset import TestItem, TestSet, read_testset, testset_name
from flowkit.io import file_sha256

__all__ = ["EvalOutcome", "EvalSettings", "default_out", "evaluate", "read_results", "totals"]

RESULTS = "results.jsonl"
REJECTIONS = "rejections.jsonl"
IDENTITY = "eval.json"
SUMMARY = "summary.json"
WAVS = "wavs"
# Long inputs are handled as `flowkit synthesize` handles them (flowkit.synth.synthesize):
# a prompt longer than its MAX_PROMPT_SECONDS is cut at a pause with its text in proportion
# (a warning says so; Seed-TTS-eval prompts are 3-10 s), and a target whose speech would make
# one piece longer than its MAX_SECONDS (prompt included) is split into pieces at sentence,
# clause or word boundaries, generated one after another and joined before the vocoder.
# A target recording longer than this gets a line before its ceilings are judged (a long one
# takes minutes through the recogniser and the vocoder, with the bar standing still).
LONG_RECORDING_SECONDS = 60.0
# What a resumed eval must share with the results it continues (``limit`` may change).
IDENTITY_KEYS = ("checkpoint", "step", "weights", "testset", "testset_sha256", "language", "seed", "nfe", "cfg",
                 "batch", "ceilings", "vocoder", "judges")


@attrs.frozen
class EvalSettings:
    """How to synthesise and judge (the ``flowkit eval`` options).

    Attributes:
        seed: noise seed; utterance ``utt`` draws from ``derive_seed(seed, "eval:" + utt)``.
        nfe: ODE steps of the run's solver (F5-TTS evaluates with 32).
        cfg: classifier-free guidance strength (F5-TTS: 2.0; 0 = off).
        batch: utterances per sampling call (see the module docstring); >= 1.
        limit: evaluate only the first ``limit`` accepted lines (None: all).
        weights: "ema" or "raw".
        language: language of the list's lines ("" : the model's only language, else "en").
        ceilings: also judge the target recordings, raw and through the vocoder.
        samples: utterances with players in eval.html (the first ones of the list).
    """

    seed: int = 0
    nfe: int = 32
    cfg: float = 2.0
    batch: int = 1
    limit: int | None = None
    weights: str = "ema"
    language: str = ""
    ceilings: bool = True
    samples: int = 20

    def __attrs_post_init__(self) -> None:
        for name, low in (("nfe", 1), ("batch", 1)):
            if getattr(self, name) < low:
                raise ConfigError(f"--{name} {getattr(self, name)} must be >= {low}")
        if self.cfg < 0:
            raise ConfigError(f"--cfg {self.cfg} must be >= 0 (F5-TTS uses 2.0; 0 = no guidance)")
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"--limit {self.limit} must be >= 1")


@attrs.frozen
class EvalOutcome:
    """What an eval wrote: its folder, the summary (totals), and how much it did this time."""

    out: Path
    summary: dict[str, Any]
    evaluated: int  # utterances synthesised in this call
    skipped: int  # finished ones found in results.jsonl
    rejected: int
    notes: tuple[str, ...] = ()


def default_out(checkpoint_or_run: str | Path, testset: str | Path, step: int) -> Path | None:
    """``RUN/evals/<testset-name>-step<step>/`` for a run directory (or a checkpoint inside
    one), ``RUN/evals/<testset-name>-<last3>-step<step>/`` for an average in
    ``RUN/averaged/<last3>/``; None for a checkpoint outside a run (``--out`` is then required)."""
    path = Path(checkpoint_or_run).resolve()
    for run in (path, path.parent.parent):
        if (run / "config.gin").is_file() and ((run / "checkpoints").is_dir() or (run / "best").is_dir()):
            return run / "evals" / f"{testset_name(testset)}-step{step}"
    run = path.parents[2] if len(path.parents) > 2 else path
    if path.parent.parent.name == "averaged" and (run / "config.gin").is_file():
        return run / "evals" / f"{testset_name(testset)}-{path.parent.name}-step{step}"
    return None


def read_results(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """The records of ``results.jsonl`` (empty when it does not exist).

    A last line without its newline was torn by a kill: it is left out, and with
    ``repair`` cut from the file so that appending continues on a line boundary.

    Raises:
        DataError: a line before the last one is not JSON (the file was edited by hand).
    """
    if not path.is_file():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data) and repair:
        with open(path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
    records = []
    for number, line in enumerate(data[:end].splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as exc:
            raise DataError(f"{path}:{number} is not JSON ({exc}); delete the line (its utterance is redone) or the "
                            "file (all are redone)") from None
    return records


def _append(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and make it durable (a kill leaves at most a torn last line)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _read_audio(path: Path) -> tuple[np.ndarray, int]:
    """Mono float32 samples ``[samples]`` and the rate of a recording."""
    import soundfile as sf

    audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return audio.mean(axis=1).astype(np.float32), int(sr)


def _rates(text: str, hypothesis: str | None, language: str) -> dict[str, Any]:
    """``wer``, ``cer``, ``words``, ``chars`` of one transcript (None where not scored)."""
    from flowkit.asr.scoring import error_rates

    if hypothesis is None:
        return {"wer": None, "cer": None, "words": None, "chars": None}
    try:
        r = error_rates([text], [hypothesis], language or "en")
    except ConfigError:  # the reference normalises to nothing (only punctuation): nothing to score
        return {"wer": None, "cer": None, "words": 0, "chars": 0}
    return {"wer": r.wer, "cer": r.cer, "words": r.words, "chars": r.chars}


def _judge(judges: Judges, audio: np.ndarray, sr: int, item: TestItem, prompt: tuple[np.ndarray, int],
           target: tuple[np.ndarray, int] | None) -> dict[str, Any]:
    """Every score of one clip (generated, or a ceiling's)."""
    from flowkit.asr.scoring import headline_metric

    hypothesis = judges.transcribe(audio, sr, item.language)
    out: dict[str, Any] = {"hypothesis": hypothesis, **_rates(item.text, hypothesis, item.language)}
    # the judge that heard it and the rate that stands for the language (CER where words are not the unit)
    out["asr"], out["error_metric"] = judges.asr_label(), headline_metric(item.language)
    out["sim"] = judges.similarity(audio, sr, *prompt)
    out["sim_target"] = None if target is None else judges.similarity(audio, sr, *target)
    quality = judges.quality_scores(audio, sr)
    out["dnsmos"] = None if quality is None else quality.get("ovrl")
    out["dnsmos_sig"] = None if quality is None else quality.get("sig")
    out["dnsmos_bak"] = None if quality is None else quality.get("bak")
    if quality is not None and "p808" in quality:
        out["dnsmos_p808"] = quality["p808"]
    return out


def _mean(values: Sequence[Any]) -> float | None:
    found = [float(v) for v in values if isinstance(v, (int, float))]
    return float(np.mean(found)) if found else None


def _block_totals(blocks: Sequence[dict[str, Any]], texts: Sequence[str], languages: Sequence[str]) -> dict[str, Any]:
    """Totals of one kind of clip: corpus WER/CER (edits over reference words, as
    `flowkit.asr.scoring` computes them), mean SIM, SIM to the target, DNSMOS."""
    from flowkit.asr.scoring import error_rates

    out: dict[str, Any] = {"items": len(blocks)}
    edits_w = words = edits_c = chars = 0.0
    for lang in sorted(set(languages)):
        pos = [k for k, b in enumerate(blocks) if languages[k] == lang and b.get("hypothesis") is not None]
        if not pos:
            continue
        try:
            r = error_rates([texts[k] for k in pos], [blocks[k]["hypothesis"] for k in pos], lang or "en")
        except ConfigError:
            continue
        edits_w, words = edits_w + r.wer * r.words, words + r.words
        edits_c, chars = edits_c + r.cer * r.chars, chars + r.chars
    out["wer"] = edits_w / words if words else None
    out["cer"] = edits_c / chars if chars else None
    out["words"] = int(words)
    for key in ("sim", "sim_target", "dnsmos", "dnsmos_sig", "dnsmos_bak"):
        out[key] = _mean([b.get(key) for b in blocks])
    return out


def totals(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Totals of the generated audio and of both ceilings over ``records`` (results lines).

    ``generated`` covers every record; ``truth`` and ``vocoded`` the records with a target
    recording, and ``generated_on_ceiling_items`` the generated audio of those same records,
    so a ratio to a ceiling compares the same sentences.
    """
    texts = [r["text"] for r in records]
    langs = [r.get("language", "") for r in records]
    out: dict[str, Any] = {"generated": _block_totals(records, texts, langs)}
    out["generated"]["duration_ratio"] = _mean([r.get("duration_ratio") for r in records])
    for kind in ("truth", "vocoded"):
        pos = [k for k, r in enumerate(records) if r.get(kind)]
        if pos:
            out[kind] = _block_totals([records[k][kind] for k in pos], [texts[k] for k in pos], [langs[k] for k in pos])
    pos = [k for k, r in enumerate(records) if r.get("truth")]
    if pos and len(pos) < len(records):
        out["generated_on_ceiling_items"] = _block_totals([records[k] for k in pos], [texts[k] for k in pos],
                                                          [langs[k] for k in pos])
    return out


def _check_identity(out: Path, identity: dict[str, Any], *, record: bool = True) -> None:
    """Refuse to continue results made with other settings (the keys ``identity`` holds);
    with ``record``, write them on a fresh start."""
    from flowkit.io import atomic_write_json

    path = out / IDENTITY
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            old = None
        if isinstance(old, dict):
            for key in IDENTITY_KEYS:
                if key in identity and old.get(key) != identity.get(key):
                    raise ResumeError(
                        f"{out} holds an eval made with {key} = {old.get(key)!r}, not {identity.get(key)!r}; give "
                        f"another --out, or delete {out} to start over"
                    )
            return
    if record:
        atomic_write_json(path, identity)


def _recorded_kernels(out: Path) -> tuple[bool, dict[str, str] | None]:
    """``(legacy, kernels)`` of the eval in ``out``: the sampling kernels its `IDENTITY` file
    records (``{"linear": ..., "onednn_min_rows": ...}``; None on a fresh start), and whether it is an eval made before
    kernels were recorded (it goes on with the kernels it started with: no sampling choice)."""
    try:
        old = json.loads((out / IDENTITY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, None
    if not isinstance(old, dict):
        return False, None
    kernels = old.get("cpu_kernels")
    return "cpu_kernels" not in old, kernels if isinstance(kernels, dict) else None


def _check_texts(ts: TestSet, vocab: Any) -> tuple[TestSet, list[str]]:
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


def _batches(items: Sequence[TestItem], size: int) -> list[list[TestItem]]:
    """Consecutive runs of ``size`` items: a fixed partition of the list (a prefix of the
    list, ``--limit``, has the same batches but the last)."""
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


class _Synthesiser:
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
        from flowkit.data.labels import emotion_id, recorded_buckets
        from flowkit.synth.sample import Utterance, inference_conditions, model_prompt
        from flowkit.text.vocabs import encode_text

        im = self.im
        utterances = []
        for item, (wave, wave_sr) in zip(batch, prompts, strict=True):
            raw = self.encode(wave)
            said = self.prompt_text(item)
            rate, loudness = recorded_buckets(wave, wave_sr, said, im.frame_rate, int(raw.shape[0]))
            labelled = bool(item.emotion) and not np.isnan(item.intensity)
            utterances.append(Utterance(
                text=encode_text(im.vocab, item.text, item.language),
                prompt=model_prompt(im.stats, raw),
                prompt_text=encode_text(im.vocab, said, item.language),
                language=im.language_id(item.language),
                emotion=emotion_id(item.emotion) if item.emotion else 0,
                intensity=float(item.intensity) if labelled else None,
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


def _record(item: TestItem, out: Path, audio_path: Path, gen: tuple[np.ndarray, int], frames: int,
            scores: dict[str, Any], seed: int) -> dict[str, Any]:
    seconds = gen[0].shape[0] / gen[1]
    return {
        "utt": item.utt, "line": item.line, "audio": os.path.relpath(audio_path, out), "text": item.text,
        "language": item.language, "prompt_text": item.prompt_text, "prompt_wav": str(item.prompt_wav),
        "target_wav": None if item.target_wav is None else str(item.target_wav),
        "frames": frames, "seconds": round(seconds, 4), "noise_seed": seed, **scores,
    }


def evaluate(
    checkpoint: str | Path,
    testset: str | Path,
    out: str | Path | None = None,
    *,
    settings: EvalSettings = EvalSettings(),
    asr: str | None = None,
    vocoder: Any = None,
    judges: Judges | None = None,
    progress: bool = True,
) -> EvalOutcome:
    """Synthesise and judge the test list ``testset`` with ``checkpoint`` into ``out``.

    Args:
        checkpoint: a checkpoint directory, or a run directory (its best, else newest).
        testset: a meta.lst or a flowkit manifest (`flowkit.evaluation.testset`).
        out: the eval folder; None: `default_out` of a run directory.
        asr: ``--asr`` (a registered recogniser); None: the default recogniser.
        vocoder: a vocoder component; None: the run's ``Trainer.vocoder``, else Griffin-Lim.
        judges: ready judges (tests); None: `build_judges`.
        progress: show a progress bar (plain lines when stdout is not a terminal).

    One eval process writes a folder: it holds ``OUT/eval.lock`` (`flowkit.data.locks`)
    while it runs, and a second one into the same folder is refused naming its pid. Writes
    follow `flowkit.io`'s policy: ``out`` is checked before the model loads (a file in
    the way, a read-only or full disk), and a write refused later is one `WriteError`.

    Raises:
        DataError: the list cannot be read, or every line of it is rejected (exit 3), or
            another eval is writing ``out`` (its pid named).
        ResumeError: ``out`` holds results made with other settings.
        ConfigError: ``out`` is a file.
        WriteError: ``out`` is on a read-only or full disk, or a write there was refused (exit 6).
        CheckpointError, ConfigError: as `load_inference_model` raises (``audio=True``: a vocoder
            that cannot invert the checkpoint's latents, too).
    """
    from flowkit import hub
    from flowkit.io import check_out_path, check_writable

    if out is None and hub.is_hub(checkpoint):
        raise ConfigError(f"{hub.parse(checkpoint)} is a checkpoint on the Hugging Face Hub; give --out DIR "
                          "(its folder is the hub's cache)")
    if out is not None:  # before the model loads
        check_out_path(out, label=f"--out {out}", folder=True)
        check_writable(out, label=f"--out {out}")
    with contextlib.ExitStack() as held:
        return _evaluate(checkpoint, testset, out, held, settings=settings, asr=asr, vocoder=vocoder, judges=judges,
                         progress=progress)


def _hold_out(out: Path, held: contextlib.ExitStack, label: str) -> None:
    """Make ``out`` and hold it for this process: writes refused there become one
    `WriteError` (`flowkit.io.refused_writes`), and ``OUT/eval.lock`` is taken."""
    from flowkit.data.locks import StoreLock
    from flowkit.io import check_out_path, check_writable, refused_writes

    check_out_path(out, label=label, folder=True)
    check_writable(out, label=label)
    held.enter_context(refused_writes(label, out))
    out.mkdir(parents=True, exist_ok=True)
    held.enter_context(StoreLock.acquire(out / "eval", what=f"eval folder {out}", retry="or give another --out",
                                         command="eval"))


def _evaluate(
    checkpoint: str | Path,
    testset: str | Path,
    out: str | Path | None,
    held: contextlib.ExitStack,
    *,
    settings: EvalSettings,
    asr: str | None,
    vocoder: Any,
    judges: Judges | None,
    progress: bool,
) -> EvalOutcome:
    """`evaluate` once ``out`` is known: ``held`` keeps its lock and write policy to the end."""
    from flowkit.console import Progress, console, err_console
    from flowkit.converters.cpu import sampling_kernels
    from flowkit.evaluation.render import write_reports
    from flowkit.flow.solvers import describe_solver
    from flowkit.io import atomic_write_bytes, atomic_write_json, atomic_write_text
    from flowkit.synth.inference import load_inference_model
    from flowkit.synth.level import fit_level
    from flowkit.synth.wav import wav_bytes
    from flowkit.train.randomness import derive_seed

    testset = Path(testset)
    # the vocoder too (the one given, else the run's Trainer.vocoder, else Griffin-Lim),
    # checked against the checkpoint's encoder record, as a report's samples choose it
    im = load_inference_model(checkpoint, weights=settings.weights, audio=True, vocoder=vocoder)
    vocoder = im.audio_vocoder
    if out is None:
        out = default_out(checkpoint, testset, im.step)
        if out is None:
            raise ConfigError(f"{checkpoint} is a checkpoint outside a run directory; give --out DIR")
    out = Path(out)
    language = settings.language or (im.languages[0] if len(im.languages) == 1 else "en")
    ts: TestSet = read_testset(testset, language=language, languages=im.languages or None)
    ts, spelled = _check_texts(ts, im.vocab)
    _hold_out(out, held, f"--out {out}")

    def warn(line: str) -> None:
        err_console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)

    for line in spelled[:10]:
        warn(line)
    if len(spelled) > 10:
        warn(f"... {len(spelled) - 10} more lines hold characters outside the model's vocabulary")
    atomic_write_text(out / REJECTIONS, "".join(json.dumps({**r.to_dict(), "source": str(testset)},
                                                           ensure_ascii=False) + "\n" for r in ts.rejections))
    for r in ts.rejections[:10]:
        console.print(f"rejected {r.describe(str(testset))}", markup=False, highlight=False, soft_wrap=True)
    if len(ts.rejections) > 10:
        console.print(f"... {len(ts.rejections) - 10} more rejected lines in {out / REJECTIONS}", markup=False)
    if not ts.items and not ts.rejections:
        raise DataError(f"{testset}: no test lines (the file is empty or blank); "
                        "give utt|prompt_text|prompt_wav|target_text lines, or a .jsonl/.csv manifest")
    if not ts.items:
        raise DataError(f"{testset}: every line was rejected ({len(ts.rejections)}; reasons in {out / REJECTIONS}); "
                        "fix the list")
    items = list(ts.items[: settings.limit])
    identity = {
        "checkpoint": str(Path(im.checkpoint).resolve()), "step": im.step, "weights": settings.weights,
        "testset": str(testset.resolve()), "testset_sha256": file_sha256(testset), "language": language,
        "seed": settings.seed, "nfe": settings.nfe, "cfg": settings.cfg, "batch": settings.batch,
        "ceilings": settings.ceilings, "vocoder": im.audio_label,
    }
    _check_identity(out, identity, record=False)  # before the judges load (seconds): fail fast
    judges = judges if judges is not None else build_judges(asr, language=language)
    identity["judges"] = judges.describe()
    # the linear and grouped-conv kernels of the forward passes: measured on a fresh start, the recorded one when
    # continuing (the remaining utterances are then the bits an unbroken eval makes)
    legacy, recorded = _recorded_kernels(out)
    with contextlib.nullcontext() if legacy else sampling_kernels(im.model, recorded=recorded) as choice:
        if choice is not None:
            identity["cpu_kernels"] = {**choice.kernels, "onednn_min_rows": choice.onednn_min_rows}
            console.print(f"sampling {choice.line()}", markup=False, highlight=False, soft_wrap=True)
        _check_identity(out, identity)
        results_path = out / RESULTS
        done = {r["utt"]: r for r in read_results(results_path, repair=True)}
        wanted = {it.utt for it in items}
        skipped = len(wanted & set(done))
        synth = _Synthesiser(im, vocoder, settings)
        synth.say = lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)
        label = f"{im.label}, {settings.nfe} steps of {describe_solver(im.solver)}, CFG {settings.cfg}"
        console.print(f"eval: {len(items)} utterances of {testset} ({len(ts.rejections)} rejected, "
                      f"{skipped} done before) "
                      f"into {out}; {label}", markup=False, highlight=False, soft_wrap=True)
        names = judges.describe()
        console.print("judges: " + ", ".join(f"{k} {v['name'] if v else 'none'}" for k, v in names.items()),
                      markup=False, highlight=False)
        for note in judges.notes:
            console.print(note, markup=False, highlight=False, soft_wrap=True)
        notes_before = list(judges.notes)
        started, new = time.perf_counter(), 0
        with Progress("eval", total=len(items), completed=skipped, unit="utt", enabled=progress) as bar:
            for batch in _batches(items, settings.batch):
                if all(it.utt in done for it in batch):
                    continue
                loaded = [synth.prompt(it) for it in batch]
                prompts = [wave for wave, _ in loaded]
                for _, cut in loaded:
                    if cut is not None:
                        warn(cut)
                spans = synth.generate(batch, prompts)
                for item, prompt, latents in zip(batch, prompts, spans, strict=True):
                    if item.utt in done:
                        continue
                    audio, sr = vocoder(latents, im.encoder)
                    audio, _ = fit_level(audio, sr)
                    audio_path = out / WAVS / f"{item.utt}.wav"
                    atomic_write_bytes(audio_path, wav_bytes(audio, sr))
                    target = _read_audio(item.target_wav) if item.target_wav is not None else None
                    scores = _judge(judges, audio, sr, item, prompt, target)
                    target_s = None if target is None else target[0].shape[0] / target[1]
                    if target_s is not None and settings.ceilings and target_s > LONG_RECORDING_SECONDS:
                        console.print(f"{item.utt}: judging its {target_s:.0f} s target recording "
                                      "raw and vocoded (the ceilings; --no-ceilings skips them)",
                                      markup=False, highlight=False, soft_wrap=True)
                    if target is not None:
                        scores["target_seconds"] = round(target[0].shape[0] / target[1], 4)
                        scores["duration_ratio"] = (audio.shape[0] / sr) / max(scores["target_seconds"], 1e-9)
                        if settings.ceilings:
                            scores["truth"] = _judge(judges, target[0], target[1], item, prompt, None)
                            scores["vocoded"] = _judge(judges, *synth.vocode_recording(*target), item, prompt, target)
                    record = _record(item, out, audio_path, (audio, sr), int(latents.shape[0]), scores,
                                     derive_seed(settings.seed, f"eval:{item.utt}"))
                    _append(results_path, record)
                    done[item.utt] = record
                    new += 1
                    minutes = (time.perf_counter() - started) / 60.0
                    bar.update(1, wer=record.get("wer"), utt_per_min=new / max(minutes, 1e-9))
        for note in judges.notes[len(notes_before):]:  # a judge that failed on first use
            console.print(note, markup=False, highlight=False, soft_wrap=True)
    records = [done[it.utt] for it in items if it.utt in done]
    elapsed = time.perf_counter() - started
    summary = {
        "testset": str(testset), "format": ts.format, "items": len(records), "rejected": len(ts.rejections),
        "model": label, "step": im.step, "judges": judges.describe(), "vocoder": im.audio_label,
        "settings": attrs.asdict(settings), "totals": totals(records), "notes": list(judges.notes),
        "utterances_per_minute": (new / (elapsed / 60.0)) if new else None,
        "cpu_kernels": identity.get("cpu_kernels"),
    }
    atomic_write_json(out / SUMMARY, summary)
    write_reports(out, summary, records, ts.rejections, samples=settings.samples)
    return EvalOutcome(out, summary, new, skipped, len(ts.rejections), tuple(judges.notes))
