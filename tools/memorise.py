"""Run gin/memorise.gin to its end: can flowkit learn speech on a CPU?

1. Prepares the 16 bundled English sentences of one speaker (allison, ``flowkit/demo/sentences``,
   picked from the asterisk-5voice corpus by the rule in tools/build_demo.py) into a store
   (log-mel latents, energy-aligner word timings, every clip in the train split).
2. Trains ``gin/memorise.gin`` on it (the probe scores those 16 sentences every
   ``Probe.every`` steps against the recorded audio and the vocoded ground truth).
3. Prints and writes ``summary.json``: steps, training minutes (probe time apart), the
   probe WER of each probe against the vocoded-ground-truth ceiling, the first step at or
   below 1.2x that ceiling, and the text gain; draws generated vs ground-truth
   spectrograms of two sentences (``spectrograms.png``; ``--docs-image`` copies it).

A run is deterministic from its seed; a run directory that holds checkpoints is resumed.

With ``--timings learned`` the 16 clips' timings come from a learned aligner (docs/alignment.md)
trained on all of the speaker's English clips in the corpus (``--corpus``, needed for this mode
only), instead of ``aligner.energy``.

Usage: python tools/memorise.py [--out runs/memorise] [--corpus ../shared/data/asterisk-5voice]
           [-b BINDING]... [--docs-image docs/images/memorise-spectrograms.png]
           [--timings energy|learned] [--align-steps N] [--align-data STORE]...
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "data" / "asterisk-5voice"
SENTENCES = REPO / "flowkit" / "demo" / "sentences"
TARGET_RATIO = 1.2  # the bar: probe WER <= 1.2x the WER of the vocoded ground truth


def prepare(store: Path) -> None:
    from flowkit.data.aligners import EnergyAligner
    from flowkit.data.prepare import PrepareSettings, prepare_store

    if (store / "zarr.json").is_file():
        return
    settings = PrepareSettings(aligner=EnergyAligner(), layout="id,text,speaker,language,split")
    summary = prepare_store([SENTENCES], store, settings=settings, workers=1,
                            progress=False)
    if summary.accepted != 16:
        sys.exit(f"memorise: prepared {summary.accepted} of 16 sentences; see {store}/rejections")


def summarise(run: Path) -> dict:
    """The figures of a finished (or stopped) memorise run, from its metrics.jsonl."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in records if r["kind"] == "train"]
    probes = {r["step"]: r for r in records if r["kind"] == "probe"}
    ceiling = next((r for r in records if r["kind"] == "probe_ceiling"), {})
    vocoded = ceiling.get("probe_truth_vocoded_wer")
    log_every = (train[1]["step"] - train[0]["step"]) if len(train) > 1 else 1
    # step_s is the time of the logged step; the steps between two records cost about the same
    minutes_at: dict[int, float] = {}
    total = 0.0
    for r in train:
        total += r["step_s"] * log_every / 60.0
        minutes_at[r["step"]] = total
    rows = []
    reached = None
    for step in sorted(probes):
        p = probes[step]
        ratio = p["probe_wer"] / vocoded if vocoded else None
        rows.append({"step": step, "train_minutes": round(minutes_at.get(step, 0.0), 2),
                     "probe_wer": p["probe_wer"], "probe_cer": p["probe_cer"], "ratio_to_vocoded": ratio,
                     "probe_text_gain": p["probe_text_gain"], "probe_s": p["probe_s"]})
        if reached is None and ratio is not None and ratio <= TARGET_RATIO:
            reached = rows[-1]
    return {
        "steps": train[-1]["step"] if train else 0,
        "train_minutes": round(total, 2),
        "probe_minutes": round(sum(p["probe_s"] for p in probes.values()) / 60.0
                               + ceiling.get("probe_s", 0.0) / 60.0, 2),
        "ceiling_vocoded_wer": vocoded,
        "ceiling_raw_wer": ceiling.get("probe_truth_raw_wer"),
        "target": f"probe WER <= {TARGET_RATIO}x the vocoded ground truth",
        "first_at_target": reached,
        "probes": rows,
    }


def spectrograms(run: Path, out: Path) -> None:
    """Generated (best probe's EMA weights: the newest checkpoint) vs ground truth, two sentences."""
    import numpy as np

    from flowkit.checkpoints import files as checkpoint
    from flowkit.data.dataset import LatentDataset
    from flowkit.report.plots import spectrograms_png
    from flowkit.synth.inference import generate, load_inference_model
    from flowkit.synth.sample import Utterance, recorded_labels

    path, _ = checkpoint.find_latest(run / "checkpoints")
    im = load_inference_model(path, weights="ema")
    data = LatentDataset.open(list(im.stores), "train")
    try:
        segs = data.segments
        picks = [0, len(segs) // 2]
        lat = data.read([*picks, 1, len(segs) // 2 + 1])
    finally:
        data.close()
    panels = []
    for k, i in enumerate(picks):
        # the whole prompt clip: its text must be all that its audio says (a clip cut short
        # would keep text its audio no longer has)
        prompt = np.asarray(im.stats.normalize(lat[2 + k]), dtype=np.float32)
        u = Utterance(text=im.vocab.encode(segs[i].text), prompt=prompt,
                      prompt_text=im.vocab.encode(segs[picks[k] + 1].text),
                      target_frames=int(segs[i].n_frames), language=im.language_id("en"),
                      **recorded_labels(segs[i]))
        gen = generate(im, [u])[0]
        panels += [(f'generated: "{segs[i].text}"', gen), ("ground truth", lat[k].astype(np.float32))]
    out.write_bytes(spectrograms_png(panels, frame_rate=im.frame_rate))


def learned_timings(corpus: Path, out: Path, store: Path, steps: int | None, extra: list[Path]) -> None:
    """Replace the 16 clips' energy timings by a learned aligner's: the aligner trains on every
    English clip of the speaker in the corpus (``OUT/allison.zarr``, ``OUT/align``), after the
    ``extra`` stores (more speech of the language, e.g. tools/speak_cpu.sh's OUT/data.zarr: 6.5
    minutes of telephone prompts alone are too little to learn from), then writes its timings
    into the 16-clip store (version ``learned``)."""
    from flowkit.align.apply import align_store
    from flowkit.align.training import train_aligner
    from flowkit.data.prepare import PrepareSettings, prepare_store
    from flowkit.data.store import StoreReader

    speaker_store = out / "allison.zarr"
    if not (speaker_store / "zarr.json").is_file():
        rows = [line.split("|") for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines()]
        manifest = out / "allison.jsonl"
        manifest.write_text("".join(json.dumps({"id": seg, "audio": str(corpus / "wavs" / f"{seg}.flac"), "text": text,
                                                "speaker": speaker, "language": language}) + "\n"
                                    for seg, text, speaker, language in rows
                                    if speaker == "allison" and language == "en" and "_silence-" not in seg),
                            encoding="utf-8")
        prepare_store([manifest], speaker_store, settings=PrepareSettings(), workers=1, progress=False)
    train_aligner([REPO / "gin" / "align.gin"], [], data=[*extra, speaker_store], out=out / "align", steps=steps)
    reader = StoreReader.open(store)
    active = reader.timings
    reader.close()
    if active != "learned":
        outcome = align_store(store, out / "align", progress=False)
        print(f"memorise: learned timings for {outcome.aligned} of 16 sentences (refused: {outcome.refused or 'none'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "memorise")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("-b", "--binding", action="append", default=[])
    parser.add_argument("--docs-image", type=Path, default=None)
    parser.add_argument("--timings", choices=("energy", "learned"), default="energy",
                        help="the 16 clips' word timings: aligner.energy's (prepare), or a learned aligner's "
                        "trained on the speaker's English clips (flowkit align)")
    parser.add_argument("--align-steps", type=int, default=None, help="the aligner's steps (default gin/align.gin's)")
    parser.add_argument("--align-data", type=Path, action="append", default=[],
                        help="another store the aligner also trains on (more speech of the language; repeatable)")
    args = parser.parse_args()
    if args.timings == "learned" and not (args.corpus / "metadata.csv").is_file():
        sys.exit(f"memorise: --timings learned trains the aligner on the asterisk-5voice corpus, which is not at "
                 f"{args.corpus}; pass --corpus DIR")
    from flowkit.checkpoints import files as checkpoint
    from flowkit.train import run

    store, run_dir = args.out / "data.zarr", args.out / "run"
    prepare(store)
    if args.timings == "learned":
        learned_timings(args.corpus, args.out, store, args.align_steps, [p.resolve() for p in args.align_data])
    bindings = [f"Probe.audio_dirs = ['{SENTENCES / 'wavs'}']", *args.binding]
    if checkpoint.list_checkpoints(run_dir / "checkpoints"):
        outcome = run.resume(run_dir, bindings=bindings)
    else:
        outcome = run.train([REPO / "gin" / "memorise.gin"], bindings, data=[store], out=run_dir)
    summary = summarise(run_dir)
    summary["status"] = outcome.status
    spectrograms(run_dir, args.out / "spectrograms.png")
    if args.docs_image:
        shutil.copyfile(args.out / "spectrograms.png", args.docs_image)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in summary.items() if k != "probes"}, indent=1))
    for row in summary["probes"]:
        print(f"step {row['step']:>5}  {row['train_minutes']:6.1f} min  WER {row['probe_wer']:.3f}  "
              f"ratio {row['ratio_to_vocoded'] or float('nan'):.2f}x  text gain {row['probe_text_gain']:+.4f}")


if __name__ == "__main__":
    main()
