"""Forward+backward time of the model presets on the CPU (median of repeats).

    python tools/bench_model.py [--presets tiny small] [--batch 4] [--frames 200] [--repeats 10] [--plain]

Prints one line per preset, text path and thread count: median wall time and median
process CPU time of one training forward+backward (losses included) of a ``batch x frames``
batch (80-channel latents, 60-symbol vocabulary), and frames per second of wall time. The
model runs the CPU layers ``flowkit train`` converts it to (`flowkit.converters.cpu`, kernels
chosen at the model's shapes); ``--plain`` times torch's own layers instead. On a
shared, loaded machine the CPU time of a one-thread run is the better estimate of the time
on an idle one. Nothing is asserted: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from flowkit.converters.cpu import choose_cpu_kernels, convert_cpu_kernels
from flowkit.flow.schedules import FlowMatching
from flowkit.losses import DurationL1, LossInputs, MaskedMSE
from flowkit.model.conditions import Conditions
from flowkit.model.dit import DiTConfig

LATENT_DIM, VOCAB, N_LANGUAGES = 80, 60, 2


def make_batch(b: int, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, Conditions]:
    """A full batch (no padding) with 10 characters per second of 50 Hz frames, words of 5."""
    nt = max(5, n // 5)
    n_units = max(1, nt // 6)
    char_unit = torch.arange(nt) // 6
    char_unit[torch.arange(nt) % 6 == 5] = -1  # a space after every 5 characters
    char_unit = char_unit.clamp_max(n_units - 1)
    edges = torch.linspace(0, n, n_units + 1).long()
    unit_frames = torch.stack([edges[:-1], edges[1:]], -1)
    target = torch.zeros(b, n, dtype=torch.bool)
    target[:, n // 3 :] = True
    x1 = torch.randn(b, n, LATENT_DIM, generator=g)
    ones = torch.ones(b, dtype=torch.bool)
    cond = Conditions(
        frame_mask=torch.ones(b, n, dtype=torch.bool),
        target_mask=target,
        prompt=x1.masked_fill(target[..., None], 0.0),
        text=torch.randint(1, VOCAB, (b, nt), generator=g),
        text_mask=torch.ones(b, nt, dtype=torch.bool),
        language=torch.ones(b, dtype=torch.long),
        emotion=torch.zeros(b, dtype=torch.long),
        intensity=torch.zeros(b),
        emotion_known=~ones,
        rate=torch.zeros(b, dtype=torch.long),
        loudness=torch.zeros(b, dtype=torch.long),
        drop_text=~ones,
        drop_prompt=~ones,
        char_unit=char_unit.expand(b, nt).clone(),
        unit_frames=unit_frames.expand(b, n_units, 2).clone(),
        unit_mask=torch.ones(b, n_units, dtype=torch.bool),
    )
    return torch.randn(b, n, LATENT_DIM, generator=g), x1, cond


def time_step(preset: str, text_path: str, b: int, n: int, repeats: int, plain: bool = False) -> tuple[float, float]:
    """Median ``(wall, CPU)`` seconds of one forward+backward (losses included) after two
    warm-up steps; ``plain``: torch's own layers, else the CPU layers ``flowkit train`` uses."""
    torch.manual_seed(0)
    model = (
        DiTConfig(preset=preset, text_path=text_path).build(LATENT_DIM, VOCAB, N_LANGUAGES).train()
    )
    if not plain:
        convert_cpu_kernels(model, choose_cpu_kernels(model).kernels)
    g = torch.Generator().manual_seed(0)
    x0, x1, cond = make_batch(b, n, g)
    schedule = FlowMatching()
    t = torch.rand(b, generator=g)
    times, cpu = [], []
    for k in range(repeats + 2):
        start, start_cpu = time.perf_counter(), time.process_time()
        x_t, target = schedule.sample(x0, x1, t)
        out = model(x_t, t, cond)
        inputs = LossInputs(out.output, target, x0, x1, x_t, t, cond, schedule, out.log_duration)
        loss = MaskedMSE()(inputs).value
        if out.log_duration is not None:
            loss = loss + DurationL1()(inputs).value
        loss.backward()
        model.zero_grad(set_to_none=True)
        if k >= 2:
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    return statistics.median(times), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["tiny", "small"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--plain", action="store_true", help="torch's own layers, without the CPU converter")
    parser.add_argument(
        "--threads", type=int, nargs="+", default=sorted({1, torch.get_num_threads()})
    )
    args = parser.parse_args()
    layers = "torch's own layers" if args.plain else "CPU layers (flowkit.converters.cpu)"
    print(f"forward+backward of {args.batch} x {args.frames} frames, median of {args.repeats}, CPU, {layers}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for preset in args.presets:
            for text_path in ("unaligned", "aligned"):
                wall, cpu = time_step(preset, text_path, args.batch, args.frames, args.repeats, args.plain)
                fps = args.batch * args.frames / wall
                print(
                    f"{preset:>8} {text_path:>9} threads={threads}: wall {wall * 1000:8.1f} ms  "
                    f"cpu {cpu * 1000:8.1f} ms  {fps:8.0f} frames/s"
                )


if __name__ == "__main__":
    main()
