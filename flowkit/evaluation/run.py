"""`evaluate`: synthesise a test list with a checkpoint, judge every utterance, write the results.

The loop, top to bottom: load the model (`flowkit.synth.inference.load_inference_model`:
the run's schedule, solver with its sway, vocoder), read the test list
(`flowkit.evaluation.testset`: bad lines become ``rejections.jsonl``), build the judges
(`flowkit.judges.panel`), skip what ``results.jsonl`` already holds
(`flowkit.evaluation.folder`: resume), then per batch (`flowkit.evaluation.synthesis`):
encode each prompt, build the conditions (`flowkit.synth.sample.inference_conditions`:
the target length from the duration head on the aligned path, else the prompt's frames
per character, as F5-TTS estimates it), integrate the flow from each utterance's own
noise, vocode, write the WAV atomically, judge it (`flowkit.judges.records.clip_scores`) and append
its line to ``results.jsonl``. At the end: totals (`totals`), ``summary.json``, ``eval.md``
and ``eval.html`` (`flowkit.evaluation.render`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from flowkit.errors import ConfigError, DataError
from flowkit.evaluation.folder import (
    REJECTIONS,
    check_identity,
    default_out,
    hold_out,
    read_results,
    recorded_kernels,
    result_record,
)
from flowkit.evaluation.settings import EvalSettings
from flowkit.evaluation.synthesis import Synthesiser, batches, check_texts
from flowkit.evaluation.testset import TestSet, read_testset
from flowkit.io import file_sha256
from flowkit.judges.panel import Judges, build_judges
from flowkit.judges.records import RESULTS, SUMMARY, WAVS, clip_scores, totals

__all__ = ["EvalOutcome", "evaluate"]

# A target recording longer than this gets a line before its ceilings are judged (a long one
# takes minutes through the recogniser and the vocoder, with the bar standing still).
LONG_RECORDING_SECONDS = 60.0


@attrs.frozen
class EvalOutcome:
    """What an eval wrote: its folder, the summary (totals), and how much it did this time."""

    out: Path
    summary: dict[str, Any]
    evaluated: int  # utterances synthesised in this call
    skipped: int  # finished ones found in results.jsonl
    rejected: int
    notes: tuple[str, ...] = ()


def _append(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and make it durable (a kill leaves at most a torn last line)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _unjudged(record: dict[str, Any], judges: Judges) -> bool:
    """Whether ``record`` lacks a score that a judge of ``judges`` gives (it was off then)."""
    return ((judges.asr is not None and record.get("asr") is None)
            or (judges.speaker is not None and record.get("sim") is None)
            or (judges.quality is not None and record.get("dnsmos") is None))


def _read_audio(path: Path) -> tuple[np.ndarray, int]:
    """Mono float32 samples ``[samples]`` and the rate of a recording."""
    import soundfile as sf

    audio, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return audio.mean(axis=1).astype(np.float32), int(sr)


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
    ts, spelled = check_texts(ts, im.vocab)
    hold_out(out, held, f"--out {out}")

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
    check_identity(out, identity, record=False)  # before the judges load (seconds): fail fast
    judges = judges if judges is not None else build_judges(asr, language=language, quality_threads=0)
    identity["judges"] = judges.describe()
    # the linear and grouped-conv kernels of the forward passes: measured on a fresh start, the recorded one when
    # continuing (the remaining utterances are then the bits an unbroken eval makes)
    legacy, recorded = recorded_kernels(out)
    with contextlib.nullcontext() if legacy else sampling_kernels(im.model, recorded=recorded) as choice:
        if choice is not None:
            identity["cpu_kernels"] = {**choice.kernels, "onednn_min_rows": choice.onednn_min_rows}
            console.print(f"sampling {choice.line()}", markup=False, highlight=False, soft_wrap=True)
        check_identity(out, identity)
        results_path = out / RESULTS
        # a line scored while a judge was off (it failed on first use) is redone by the judges on now
        done = {r["utt"]: r for r in read_results(results_path, repair=True) if not _unjudged(r, judges)}
        wanted = {it.utt for it in items}
        skipped = len(wanted & set(done))
        synth = Synthesiser(im, vocoder, settings)
        synth.say = lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True)
        label = f"{im.label}, {settings.nfe} steps of {describe_solver(im.solver)}, CFG {settings.cfg}"
        console.print(f"eval: {len(items)} utterances of {testset} ({len(ts.rejections)} rejected, "
                      f"{skipped} done before) "
                      f"into {out}; {label}", markup=False, highlight=False, soft_wrap=True)
        names = judges.describe()
        console.print("judges: " + ", ".join(f"{k} {v['name'] if v else 'none'}" for k, v in names.items()),
                      markup=False, highlight=False, soft_wrap=True)
        for note in judges.notes:
            console.print(note, markup=False, highlight=False, soft_wrap=True)
        notes_before = list(judges.notes)
        started, new = time.perf_counter(), 0
        with Progress("eval", total=len(items), completed=skipped, unit="utt", enabled=progress) as bar:
            for batch in batches(items, settings.batch):
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
                    scores = clip_scores(judges, audio, sr, item.text, item.language, prompt, target)
                    target_s = None if target is None else target[0].shape[0] / target[1]
                    if target_s is not None and settings.ceilings and target_s > LONG_RECORDING_SECONDS:
                        console.print(f"{item.utt}: judging its {target_s:.0f} s target recording "
                                      "raw and vocoded (the ceilings; --no-ceilings skips them)",
                                      markup=False, highlight=False, soft_wrap=True)
                    if target is not None:
                        scores["target_seconds"] = round(target[0].shape[0] / target[1], 4)
                        scores["duration_ratio"] = (audio.shape[0] / sr) / max(scores["target_seconds"], 1e-9)
                        if settings.ceilings:
                            scores["truth"] = clip_scores(judges, *target, item.text, item.language, prompt, None)
                            scores["vocoded"] = clip_scores(judges, *synth.vocode_recording(*target), item.text,
                                                            item.language, prompt, target)
                    record = result_record(item, out, audio_path, (audio, sr), int(latents.shape[0]), scores,
                                           derive_seed(settings.seed, f"eval:{item.utt}"))
                    _append(results_path, record)
                    done[item.utt] = record
                    new += 1
                    for note in judges.notes[len(notes_before):]:  # a judge that failed on first use
                        console.print(note, markup=False, highlight=False, soft_wrap=True)
                    notes_before = list(judges.notes)
                    minutes = (time.perf_counter() - started) / 60.0
                    bar.update(1, wer=record.get("wer"), utt_per_min=new / max(minutes, 1e-9))
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
