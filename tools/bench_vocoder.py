"""Decode speed of the vocoders on the CPU, as x real time (seconds of audio per second).

    python tools/bench_vocoder.py [--path VOCOS_DIR] [--seconds 5] [--batch 1 4] [--threads 1 2] [--repeats 7]

Vocos runs at the published charactr/vocos-mel-24khz size (13.5M parameters) with random
weights, or from ``--path`` (a release directory); speed does not depend on the weights.
The input is ``vocos_mel`` latents of random values, ``seconds`` long (93.75 frames per
second). For each thread count the tool alternates Vocos (each batch size) and
``vocoder.griffin_lim`` (32 iterations, one clip) repeat by repeat, so load from other
processes falls on both; it prints the median wall time per clip, x real time, and Vocos's
speed as a multiple of Griffin-Lim's, measured in the same run. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from flowkit.data.encoders import VocosMel
from flowkit.synth.vocoders import GriffinLim
from flowkit.synth.vocos import VocosConfig, VocosNet, load_vocos


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", help="a Vocos release directory (default: random weights, published size)")
    parser.add_argument("--seconds", type=float, default=5.0, help="audio seconds per clip")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4], help="clips decoded together by Vocos")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    torch.manual_seed(0)
    net = load_vocos(args.path).net if args.path else VocosNet(VocosConfig()).eval()
    enc = VocosMel()
    record = {"name": "vocos_mel", "params": enc.params()}
    frames = int(round(args.seconds * enc.frame_rate))
    audio_s = net.samples(frames) / enc.sample_rate
    rng = np.random.default_rng(0)
    latents = rng.normal(-4.0, 2.0, (max(args.batch), frames)).astype(np.float32)
    features = torch.from_numpy(np.repeat(latents[:, None, :], enc.n_mels, axis=1))  # [b d n]
    griffin = GriffinLim()
    params = sum(p.numel() for p in net.parameters())
    print(f"vocos: {params / 1e6:.1f}M parameters; clips of {audio_s:.2f} s ({frames} frames); "
          f"{args.repeats} alternated repeats; medians")
    for threads in args.threads:
        torch.set_num_threads(threads)
        times: dict[str, list[float]] = {f"vocos b={b}": [] for b in args.batch} | {"griffin_lim": []}
        net.decode(features[:1, :, :8])  # warm-up
        griffin(latents[0][:, None].repeat(enc.n_mels, 1)[:50], record)
        for _ in range(args.repeats):
            for b in args.batch:
                times[f"vocos b={b}"].append(_timed(lambda b=b: net.decode(features[:b])) / b)
            times["griffin_lim"].append(_timed(lambda: griffin(features[0].T.numpy(), record)))
        gl = statistics.median(times["griffin_lim"])
        for name, values in times.items():
            med = statistics.median(values)
            note = "" if name == "griffin_lim" else f"; speed {gl / med:.2f}x griffin_lim's"
            print(f"threads={threads} {name:<13} {med * 1e3:8.1f} ms per clip  {audio_s / med:7.1f}x real time{note}")


if __name__ == "__main__":
    main()
