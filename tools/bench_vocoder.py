"""Decode speed of the vocoders on the CPU, as x real time (seconds of audio per second).

    python tools/bench_vocoder.py [--path VOCOS_DIR] [--reference-src VOCOS_SRC] [--seconds 5]
        [--batch 1 4] [--threads 1 2] [--repeats 7]

Vocos runs at the published charactr/vocos-mel-24khz size (13.5M parameters) with random
weights, or from ``--path`` (a release directory); speed does not depend on the weights.
The input is ``vocos_mel`` latents of random values, ``seconds`` long (93.75 frames per
second). For each thread count the tool alternates flowkit's Vocos (`flowkit.synth.vocos`,
each batch size), the reference Vocos when ``--reference-src`` is given, and
``vocoder.griffin_lim`` (32 iterations, one clip) repeat by repeat, so load from other
processes falls on all; it prints the median wall time per clip, x real time, and speed as
a multiple of Griffin-Lim's, measured in the same run. Nothing is asserted.

``--reference-src`` is a checkout of charactr-platform/vocos (the commit the parity fixtures
come from: 86db50a025ecaddf864366d5dbfc83554ceedc60). Its ``vocos.models.VocosBackbone`` and
``vocos.heads.ISTFTHead`` (``Vocos.decode`` is ``head(backbone(features))``) are built at
the same size and given flowkit's weights (one state-dict layout), read from the source
without the package ``__init__`` (it imports the feature extractors, torchaudio and
EnCodec, which decoding never calls; torchaudio does not load beside this torch, so its one
import in ``heads.py`` gets a stand-in). The tool prints ``ratio flowkit/reference`` per
batch and the largest difference of the two audios.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

from flowkit.data.encoders import VocosMel
from flowkit.synth.vocoders import GriffinLim
from flowkit.synth.vocos import VocosConfig, VocosNet, load_vocos


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def load_reference(src: Path, net: VocosNet) -> torch.nn.Module:
    """The reference ``Vocos`` decoder (backbone and ISTFT head) from a charactr-platform/vocos
    checkout, holding ``net``'s weights; ``decode(features [b d n]) -> audio [b s]``."""
    root = src / "vocos"
    if not (root / "models.py").is_file() or not (root / "heads.py").is_file():
        raise SystemExit(f"{src} is not a charactr-platform/vocos checkout (no vocos/models.py, vocos/heads.py)")
    try:
        importlib.import_module("torchaudio.functional.functional")
    except ImportError:  # only the IMDCT cosine head calls these mel helpers
        for name in ("torchaudio", "torchaudio.functional", "torchaudio.functional.functional"):
            sys.modules[name] = types.ModuleType(name)
        sys.modules["torchaudio.functional.functional"]._hz_to_mel = None
        sys.modules["torchaudio.functional.functional"]._mel_to_hz = None
    package = types.ModuleType("vocos")
    package.__path__ = [str(root)]
    sys.modules["vocos"] = package
    models, heads = importlib.import_module("vocos.models"), importlib.import_module("vocos.heads")
    cfg = net.cfg

    class Reference(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = models.VocosBackbone(input_channels=cfg.n_mels, dim=cfg.dim,
                                                 intermediate_dim=cfg.intermediate_dim, num_layers=cfg.num_layers)
            self.head = heads.ISTFTHead(dim=cfg.dim, n_fft=cfg.head_n_fft, hop_length=cfg.head_hop_length,
                                        padding="center")

        @torch.inference_mode()
        def decode(self, features: torch.Tensor) -> torch.Tensor:
            return self.head(self.backbone(features))

    ref = Reference()
    ref.load_state_dict(net.state_dict())
    return ref.eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", help="a Vocos release directory (default: random weights, published size)")
    parser.add_argument("--reference-src", type=Path,
                        help="a charactr-platform/vocos checkout: also time the reference decoder")
    parser.add_argument("--seconds", type=float, default=5.0, help="audio seconds per clip")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4], help="clips decoded together by Vocos")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for name, value in (("batch", min(args.batch)), ("threads", min(args.threads)), ("repeats", args.repeats)):
        if value < 1:
            parser.error(f"--{name} must be at least 1, got {value}")
    if args.seconds < 0.1:
        parser.error(f"--seconds must be at least 0.1 (a few frames of audio), got {args.seconds:g}")

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
    ref = load_reference(args.reference_src, net) if args.reference_src else None
    params = sum(p.numel() for p in net.parameters())
    print(f"vocos: {params / 1e6:.1f}M parameters; clips of {audio_s:.2f} s ({frames} frames); "
          f"{args.repeats} alternated repeats; medians; torch {torch.__version__}")
    if ref is not None:
        diff = float((net.decode(features[:1]) - ref.decode(features[:1])).abs().max())
        print(f"reference Vocos from {args.reference_src}: largest audio difference to flowkit's {diff:.2e}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        decoders = {"vocos": net.decode} | ({"reference": ref.decode} if ref is not None else {})
        times: dict[str, list[float]] = {f"{k} b={b}": [] for b in args.batch for k in decoders} | {"griffin_lim": []}
        for decode in decoders.values():
            decode(features[:1, :, :8])  # warm-up
        griffin(latents[0][:, None].repeat(enc.n_mels, 1)[:50], record)
        for _ in range(args.repeats):
            for b in args.batch:
                for k, decode in decoders.items():
                    times[f"{k} b={b}"].append(_timed(lambda b=b, decode=decode: decode(features[:b])) / b)
            times["griffin_lim"].append(_timed(lambda: griffin(features[0].T.numpy(), record)))
        med = {name: statistics.median(values) for name, values in times.items()}
        for name, m in med.items():
            note = "" if name == "griffin_lim" else f"; speed {med['griffin_lim'] / m:.2f}x griffin_lim's"
            print(f"threads={threads} {name:<15} {m * 1e3:8.1f} ms per clip  {audio_s / m:7.1f}x real time{note}")
        if ref is not None:
            for b in args.batch:
                print(f"threads={threads} ratio flowkit/reference: "
                      f"{med[f'vocos b={b}'] / med[f'reference b={b}']:.3f} (batch {b})")


if __name__ == "__main__":
    from flowkit.config import one_line
    from flowkit.errors import FlowkitError

    try:
        main()
    except FlowkitError as error:  # a bad store, config or checkpoint path: one line, as flowkit's commands say it
        print(f"{Path(__file__).name}: {one_line(error)}", file=sys.stderr)
        sys.exit(error.exit_code)
