"""Probe the saved checkpoints of runs after the fact: WER/CER per checkpoint, as a table.

The same probe as ``Trainer.probe`` (`flowkit.train.probe`: fixed sentences, prompts and
noise, EMA weights, the run's solver; Griffin-Lim unless ``--vocoder`` names another), for
runs trained without it or to compare recipes on equal terms. Prints one JSON line per
checkpoint (and the ceilings first) and appends them to ``--out`` when given.

Usage: python tools/probe_checkpoints.py RUN [RUN...] [--split train] [--sentences 16]
           [--every 200] [--audio-dir DIR] [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main() -> None:
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
    args = parser.parse_args()

    from flowkit import registry
    from flowkit.data.dataset import LatentDataset
    from flowkit.synth.inference import load_inference_model
    from flowkit.synth.vocoders import GriffinLim
    from flowkit.train import checkpoint
    from flowkit.train.probe import ProbeRunner, ProbeSettings

    registry.load_plugins()
    settings = ProbeSettings(asr=registry.build("asr", "pocketsphinx"), sentences=args.sentences, split=args.split,
                             cfg_strength=args.cfg, solver_steps=args.solver_steps, audio_dirs=tuple(args.audio_dir))
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
        for step, path in found:
            if step not in steps:
                continue
            im = load_inference_model(path, weights="ema")
            if runner is None:
                data = LatentDataset.open(list(im.stores), args.split)
                try:
                    runner = ProbeRunner(settings, data, stats=im.stats, vocab=im.vocab, languages=im.languages,
                                         schedule=im.schedule, solver=im.solver, vocoder=GriffinLim(),
                                         encoder=dict(im.encoder), run_seed=int(json.loads(
                                             (path / "meta.json").read_text())["seed"]), device="cpu")
                finally:
                    data.close()
                if not args.no_ceilings:
                    emit({"run": str(run), "kind": "probe_ceiling", "step": 0, **runner.ceilings()})
            values = runner.probe(im.model)
            emit({"run": str(run), "kind": "probe", "step": step, **values,
                  "hypotheses": runner.last_hypotheses})


if __name__ == "__main__":
    main()
