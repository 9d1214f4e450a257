"""``flowkit eval``: a thin wrapper over `flowkit.evaluation.run.evaluate`. Only typer,
pathlib and typing are imported here; torch loads inside the command body.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def evaluate(
    checkpoint: Annotated[Path, typer.Argument(
        help="A checkpoint directory, or a run directory (its best, else newest).")],
    testset: Annotated[Path, typer.Option(
        "--testset",
        help="A meta.lst (utt|prompt_text|prompt_wav|target_text[|target_wav]) or a .jsonl/.csv manifest.")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Eval folder. Default for a run: RUN/evals/<testset>-step<N>/. "
                     "Run again to continue."),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Noise seed (each utterance's noise comes from (seed, utt)).")
    ] = 0,
    seeds: Annotated[int, typer.Option(
        "--seeds", min=1,
        help="Evaluate with K noise seeds (--seed .. --seed+K-1), one folder each under --out, and print each "
             "figure's mean and 95 % interval (bootstrap over utterances and seeds) into OUT/seeds.json.")] = 1,
    nfe: Annotated[int, typer.Option("--nfe", min=1, help="ODE solver steps (F5-TTS: 32).")] = 32,
    cfg: Annotated[float, typer.Option("--cfg", min=0.0, help="Classifier-free guidance strength (0 = off).")] = 2.0,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N accepted lines.")] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Utterances per sampling call (padded, masked).")] = 1,
    asr: Annotated[
        str | None,
        typer.Option("--asr", help="Recogniser: whisper, pocketsphinx or a plugin's; default: Whisper where installed, "
                     "else pocketsphinx."),
    ] = None,
    language: Annotated[
        str, typer.Option("--language", help="Language of the list's lines (default: the model's only one, else en).")
    ] = "",
    no_ceilings: Annotated[
        bool, typer.Option("--no-ceilings", help="Do not judge the target recordings (raw and vocoded).")
    ] = False,
    samples: Annotated[int, typer.Option("--samples", min=0, help="Utterances with audio players in eval.html.")] = 20,
    raw: Annotated[bool, typer.Option("--raw", help="Use the raw weights instead of the EMA weights.")] = False,
    vocoder: Annotated[
        str | None,
        typer.Option("--vocoder", help="griffin_lim, vocos, or a plugin's; default: the run's Trainer.vocoder, "
                     "else griffin_lim."),
    ] = None,
    vocoder_path: Annotated[
        Path | None,
        typer.Option("--vocoder-path",
                     help="Directory of the vocoder's files (vocos); alone, it means --vocoder vocos."),
    ] = None,
) -> None:
    """Synthesise a test list and judge it: WER, CER, SIM, DNSMOS, duration ratio, with ceilings.

    Writes results.jsonl (one line per utterance), rejections.jsonl, summary.json, eval.md,
    eval.html and wavs/. A killed eval continues where it stopped when run again.
    """
    from flowkit.console import console
    from flowkit.evaluation.run import evaluate as run_eval
    from flowkit.evaluation.settings import EvalSettings

    chosen = None
    if vocoder is not None or vocoder_path is not None:
        from flowkit.synth.vocoders import choose_vocoder

        chosen = choose_vocoder(vocoder, vocoder_path)
    settings = EvalSettings(seed=seed, nfe=nfe, cfg=cfg, batch=batch, limit=limit, weights="raw" if raw else "ema",
                            language=language, ceilings=not no_ceilings, samples=samples)
    if seeds > 1:
        from flowkit.evaluation.seeds import evaluate_seeds

        done = evaluate_seeds(checkpoint, testset, out, range(seed, seed + seeds), settings=settings, asr=asr,
                              vocoder=chosen)
        for kind, figures in done.summary["figures"].items():
            line = "  ".join(f"{name.upper()} {i['mean']:.3f} [{i['low']:.3f}, {i['high']:.3f}]"
                             for name, i in figures.items())
            console.print(f"{kind} (mean [95 % interval], {len(done.seeds)} seeds): {line}", markup=False,
                          highlight=False)
        console.print(f"wrote {done.out}/seeds.json and seed-*/ (seeds {', '.join(map(str, done.seeds))})",
                      markup=False, highlight=False)
        return
    outcome = run_eval(checkpoint, testset, out, settings=settings, asr=asr, vocoder=chosen)
    totals = outcome.summary["totals"]

    def show(key: str) -> str:
        t = totals.get(key) or {}
        parts = [f"{name} {t[k]:.3f}" for name, k in (("WER", "wer"), ("CER", "cer"), ("SIM", "sim"),
                                                     ("DNSMOS", "dnsmos")) if isinstance(t.get(k), (int, float))]
        return "  ".join(parts) or "-"

    console.print(f"generated: {show('generated')}", markup=False, highlight=False)
    for key, label in (("truth", "recordings"), ("vocoded", "recordings vocoded")):
        if totals.get(key):
            console.print(f"{label} (ceiling): {show(key)}", markup=False, highlight=False)
    console.print(f"wrote {outcome.out}/results.jsonl, eval.md, eval.html ({outcome.evaluated} new, "
                  f"{outcome.skipped} done before, {outcome.rejected} rejected)", markup=False, highlight=False,
                  soft_wrap=True)
