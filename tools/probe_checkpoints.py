"""Probe the saved checkpoints of runs after the fact: WER/CER per checkpoint, as a table.

The same probe as ``Trainer.probe`` (`flowkit.train.probe`: fixed sentences, prompts and
noise, EMA weights, the run's solver; Griffin-Lim unless ``--vocoder`` names another; the
probe's default judges: Whisper, resemblyzer and DNSMOS when ``flowkit[eval]`` is
installed), for runs trained without it or to compare recipes on equal terms. Prints one JSON line per
checkpoint (and the ceilings first) and appends them to ``--out`` when given.

Usage: python tools/probe_checkpoints.py RUN [RUN...] [--split train] [--sentences 16]
           [--every 200] [--audio-dir DIR] [--out FILE.jsonl] [--asr pocketsphinx] [--no-judges]
       python tools/probe_checkpoints.py --plot OUT.png FILE.jsonl [FILE.jsonl...] [--label RUN=NAME]...
           (probe WER against step, one curve per run, the ceilings dashed)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def plot(png: Path, files: list[Path], labels: dict[str, str]) -> None:
    """One probe-WER curve per run found in ``files`` (JSON lines this tool wrote)."""
    from flowkit.report.plots import Curve, curves_png

    probes: dict[str, dict[int, float]] = {}
    ceilings: dict[str, float] = {}
    for file in files:
        for line in file.read_text().splitlines():
            r = json.loads(line)
            if r["kind"] == "probe":
                probes.setdefault(r["run"], {})[r["step"]] = r["probe_wer"]
            elif r["kind"] == "probe_ceiling":
                ceilings.setdefault("ground truth through the vocoder", r["probe_truth_vocoded_wer"])
                if "probe_truth_raw_wer" in r:
                    ceilings.setdefault("ground truth, recorded", r["probe_truth_raw_wer"])
    curves = [Curve(labels.get(run, run), sorted(points), [points[s] for s in sorted(points)])
              for run, points in probes.items()]
    last = max((s for points in probes.values() for s in points), default=1)
    curves += [Curve(name, [0, last], [value, value], dashed=True) for name, value in ceilings.items()]
    png.write_bytes(curves_png("probe WER of the 16 memorised sentences", "WER (pocketsphinx)", curves))


def main() -> None:
    if "--plot" in sys.argv:
        plotter = argparse.ArgumentParser()
        plotter.add_argument("--plot", type=Path, required=True)
        plotter.add_argument("files", nargs="+", type=Path)
        plotter.add_argument("--label", action="append", default=[])
        a = plotter.parse_args()
        plot(a.plot, a.files, dict(x.split("=", 1) for x in a.label))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--split", default="val", choices=("val", "train"))
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--every", type=int, default=None, help="only checkpoints whose step is a multiple of this")
    parser.add_argument("--steps", type=int, nargs="*", default=None, help="only these checkpoint steps")
    parser.add_argument("--cfg", type=float, default=2.0)
    parser.add_argument("--solver-steps", type=int, default=32)
    parser.add_argument("--audio-dir", action="append", default=[])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-ceilings", action="store_true", help="skip the ground-truth ceilings")
    parser.add_argument("--asr", default=None, help="asr plugin name (whisper, pocketsphinx); default: Whisper "
                        "when flowkit[eval] is installed, else pocketsphinx (flowkit.judges.choice)")
    parser.add_argument("--no-judges", action="store_true", help="skip speaker similarity and DNSMOS")
    args = parser.parse_args()

    from flowkit import registry
    from flowkit.batching.builder import BatchBuilder
    from flowkit.batching.collate import CFGDrop
    from flowkit.batching.pairing import InClip
    from flowkit.checkpoints import files as checkpoint
    from flowkit.data.dataset import LatentDataset
    from flowkit.synth.inference import load_inference_model
    from flowkit.synth.vocoders import GriffinLim
    from flowkit.train.probe import ProbeRunner, ProbeSettings

    registry.load_plugins()
    judges = {"speaker": None, "quality": None} if args.no_judges else {}
    settings = ProbeSettings(asr=registry.build("asr", args.asr) if args.asr else None, sentences=args.sentences,
                             split=args.split, cfg_strength=args.cfg, solver_steps=args.solver_steps,
                             audio_dirs=tuple(args.audio_dir), **judges)
    out = args.out.open("a", encoding="utf-8") if args.out else None

    def emit(record: dict) -> None:
        line = json.dumps(record)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    for run in args.runs:
        found = checkpoint.list_checkpoints(run / "checkpoints")
        if not found:
            sys.exit(f"probe_checkpoints: {run} has no checkpoints")
        steps = [s for s, _ in found if (args.every is None or s % args.every == 0)
                 and (args.steps is None or s in args.steps)]
        runner = None
        paths = dict(found)
        order = [s for s in (args.steps or []) if s in steps] or steps  # the order asked for
        for step in order:
            path = paths[step]
            im = load_inference_model(path, weights="ema")
            if runner is None:
                data = LatentDataset.open(list(im.stores), args.split)
                try:
                    # the text gain as training saw the sentences: in-clip spans, true timings
                    builder = BatchBuilder(data, InClip(), im.stats, im.vocab, list(im.languages),
                                           im.model.cfg.text_path, CFGDrop())
                    runner = ProbeRunner(settings, data, stats=im.stats, vocab=im.vocab, languages=im.languages,
                                         schedule=im.schedule, solver=im.solver, vocoder=GriffinLim(),
                                         encoder=dict(im.encoder), run_seed=int(json.loads(
                                             (path / "meta.json").read_text())["seed"]), device="cpu",
                                         builder=builder)
                finally:
                    data.close()
                if not args.no_ceilings:
                    emit({"run": str(run), "kind": "probe_ceiling", "step": 0, **runner.ceilings()})
            values = runner.probe(im.model)
            emit({"run": str(run), "kind": "probe", "step": step, **values,
                  "hypotheses": runner.last_hypotheses})


if __name__ == "__main__":
    main()
