"""``flowkit report`` and ``flowkit synthesize``: thin wrappers over `flowkit.report.build`
and `flowkit.synth.synthesize`. Only typer, pathlib and typing are imported here;
torch and matplotlib load inside the command bodies so ``--help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def _is_aligner_run(run: Path) -> bool:
    import json

    try:
        return json.loads((run / "run_info.json").read_text(encoding="utf-8")).get("kind") == "aligner"
    except (OSError, ValueError, AttributeError):
        return False


def report(
    run_dirs: Annotated[list[Path], typer.Argument(
        help="One run directory, or several to compare side by side; a sweep directory (flowkit sweep --out) "
             "compares its points.")],
    samples: Annotated[
        int, typer.Option("--samples", min=0, help="Validation items to synthesise per run (best EMA checkpoint).")
    ] = 0,
    out: Annotated[
        Path | None,
        typer.Option("--out",
                     help="Output folder. Default: the run directory (one run), ./report-<timestamp> (several)."),
    ] = None,
    vocoder: Annotated[
        str | None, typer.Option("--vocoder", help="Vocoder of the samples (griffin_lim, vocos, ...); default: the "
                                 "run's Trainer.vocoder, else griffin_lim.")
    ] = None,
    vocoder_path: Annotated[
        Path | None, typer.Option("--vocoder-path",
                                  help="Directory of the vocoder's files (vocos: config.yaml + pytorch_model.bin).")
    ] = None,
    objective: Annotated[
        str | None, typer.Option("--objective", help="What names the best run of a comparison: val_loss_ema or "
                                 "probe_wer (default: the sweep's, else val_loss_ema).")
    ] = None,
) -> None:
    """Write report.md and a self-contained report.html (plots, tables, audio samples).

    Works on finished, interrupted and still-running runs. Several runs, or a sweep
    directory, give one sortable table of the runs, the best one named, overlaid curves.
    """
    from flowkit.console import console
    from flowkit.report.build import write_report

    if len(run_dirs) == 1 and _is_aligner_run(run_dirs[0]):
        from flowkit.cli.align import report as align_report

        align_report(run_dirs[0])  # an aligner run's report: its loss curve and alignment plots
        return
    chosen = None
    if vocoder is not None or vocoder_path is not None:
        from flowkit.synth.vocoders import choose_vocoder

        chosen = choose_vocoder(vocoder, vocoder_path)
    from flowkit.io import check_out_path, check_writable, refused_writes
    from flowkit.report.build import default_out

    target = out if out is not None else default_out(run_dirs)
    where = f"--out {target}" if out is not None else f"report (default --out {target})"
    check_out_path(target, label=where, folder=True)
    check_writable(target, label=where)
    with refused_writes(where, target):
        files = write_report(run_dirs, out=target, samples=samples, vocoder=chosen, objective=objective)
    console.print(f"wrote {files.markdown} and {files.html}", highlight=False, markup=False)


def synthesize(
    checkpoint: Annotated[Path, typer.Argument(
        help="A checkpoint directory, or a run directory (its best, else newest).")],
    text: Annotated[str, typer.Option("--text", help="Text to speak.")],
    out: Annotated[Path, typer.Option("--out", help="Output audio file (.wav).")],
    prompt: Annotated[Path | None, typer.Option("--prompt", help="Reference audio of the voice (WAV/FLAC).")] = None,
    prompt_text: Annotated[str, typer.Option("--prompt-text", help="What the prompt audio says.")] = "",
    steps: Annotated[int, typer.Option("--steps", min=1, help="ODE solver steps.")] = 32,
    cfg: Annotated[float, typer.Option("--cfg", min=0.0, help="Classifier-free guidance strength (0 = off).")] = 2.0,
    seconds: Annotated[
        float | None,
        typer.Option("--seconds", help="Length of the speech; default: duration head, prompt rate, or text length."),
    ] = None,
    language: Annotated[str, typer.Option("--language", help="Language code of the text (e.g. en).")] = "",
    raw: Annotated[bool, typer.Option("--raw", help="Use the raw weights instead of the EMA weights.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the initial noise.")] = 0,
    vocoder: Annotated[
        str | None, typer.Option("--vocoder", help="griffin_lim, vocos, or a plugin's; default: the run's "
                                 "Trainer.vocoder, else griffin_lim.")
    ] = None,
    vocoder_path: Annotated[
        Path | None, typer.Option("--vocoder-path", help="Directory of the vocoder's files (vocos: config.yaml + "
                                  "pytorch_model.bin); alone, it means --vocoder vocos.")
    ] = None,
    loudness: Annotated[
        float | None, typer.Option("--loudness", help="Normalise to this integrated loudness (LUFS, e.g. -23); "
                                   "default: keep the vocoder's level.")
    ] = None,
    max_seconds: Annotated[
        float, typer.Option("--max-seconds", help="Longest piece of speech, prompt included (s); a longer text is "
                            "split at sentence, clause or word boundaries.")
    ] = 30.0,
) -> None:
    """Synthesise one utterance to an audio file."""
    from flowkit.console import console, err_console
    from flowkit.synth.synthesize import synthesize_file

    def warn(line: str) -> None:  # as it arises, before a long synthesis starts
        err_console.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)

    chosen = None
    if vocoder is not None or vocoder_path is not None:
        from flowkit.synth.vocoders import choose_vocoder

        chosen = choose_vocoder(vocoder, vocoder_path)
    from flowkit.io import check_out_path, check_writable, refused_writes

    check_out_path(out, label=f"--out {out}", folder=False)  # before the model is loaded
    check_writable(out.parent, label=f"--out {out}")
    with refused_writes(f"--out {out}", out.parent):
        result = synthesize_file(
            checkpoint, text, out, prompt=prompt, prompt_text=prompt_text, steps=steps, cfg_strength=cfg,
            seconds=seconds, language=language, weights="raw" if raw else "ema", seed=seed, vocoder=chosen,
            loudness=loudness, max_seconds=max_seconds, on_warning=warn, progress=True,
        )
    if result.encoder_from == "defaults":
        console.print(
            "warning: the checkpoint records no encoder and its stores are gone; decoding with the log_mel "
            "defaults (a guess)", highlight=False, markup=False,
        )
    console.print(
        f"wrote {result.path}: {result.seconds:.2f} s of audio ({result.frames} latent frames, "
        f"length from {result.length_from}"
        f"{f', {result.pieces} pieces' if result.pieces > 1 else ''}); "
        f"{result.label}; {result.vocoder}, {result.level}",
        highlight=False, markup=False,
    )
