"""Sampling speed: F5-TTS's own ``CFM.sample`` against flowkit's sampler, side by side.

Both models have tools/bench_peer.py's size (dim 256, depth 4, 4 heads of 64, feed-forward
x2, text dim 128, two ConvNeXt text layers, 100-dim mel frames) with random weights (speed
does not depend on them), and both integrate 32 Euler steps on F5-TTS's swayed grid
(sway -1) with classifier-free guidance at strength 2: F5-TTS's inference defaults. Every
item has a prompt (clean frames and their text) and a target span; the batch's items have
the same prompt, text and target lengths on both sides (drawn once from ``--seed``), and
differ from each other, so a batch of more than one is padded. A timed call is the whole
user-facing call: F5-TTS ``CFM.sample(cond, text, duration, lens=...)``; flowkit
`flowkit.synth.sample.inference_conditions` + `flowkit.synth.sample.synthesize`. The two
sides alternate call by call in one process (the first of a pair swaps every pair), so load
from other processes falls on both. flowkit runs its unaligned (F5-TTS) and its aligned (E11)
text path against the same F5-TTS calls.

F5-TTS is read from its source tree with tools/bench_peer.py's loader. Its sampler needs
``torchdiffeq`` (``pip install torchdiffeq``, for this tool only); without it a stand-in
fixed-grid Euler integrator of the same grid is used, and the tool says so.

    .venv/bin/python tools/bench_sampling.py F5_SRC_DIR [--batch 1 8] [--pairs 5] [--reference] [--training-kernels]

Prints each side's median call and ``ratio flowkit/F5: X`` per batch size and text path
(target <= 0.80). flowkit samples with the linear kernel that
`flowkit.converters.cpu.sampling_kernels` measures faster for forward passes, as
``flowkit synthesize`` and ``flowkit eval`` do, and prints the choice. ``--reference`` also
times the plain path the tests check flowkit's sampler against (two full forward passes per
step, tests/synth/reference_sampler.py);
``--training-kernels`` also times flowkit's sampler converted to the training defaults (the
sampling before `sampling_kernels`). ``--profile`` then profiles 2 more calls of F5-TTS's side
and of flowkit's and prints, side by side, where a call goes (tools/bench_peer.py's categories:
block GEMMs, attention, convolutions, element-wise, copies and fills, autograd and Python; ms
per call), then each side's top ops by self CPU time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from bench_peer import CATEGORIES, CONV_LAYERS, DEPTH, DIM, FF_MULT, HEADS, MEL, TEXT_DIM, VOCAB, breakdown, load_f5  # noqa: E402, I001

STEPS, CFG, SWAY = 32, 2.0, -1.0  # F5-TTS's inference defaults (infer_cli: nfe_step 32, cfg 2, sway -1)
SPACE = 3  # the separator id of the benchmark's texts (flowkit's aligned path cuts units there)


def make_items(batch: int, seed: int, frames: int) -> list[dict]:
    """Per item: prompt frames and latents, prompt text, target text and target frames.
    Totals are ``frames`` for the first item, down to ~70 % of it for the others."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(batch):
        total = frames if i == 0 else int(frames * (0.7 + 0.3 * float(torch.rand(1, generator=g))))
        n_prompt = int(total * 0.4)
        # ~ 93.75 frames per second of speech and 14 characters a second: ~6.7 frames per character
        chars = max(4, round(total / 6.7))
        k = max(2, round(chars * 0.4))

        def text(n: int) -> list[int]:
            ids = torch.randint(4, VOCAB, (n,), generator=g).tolist()
            return [SPACE if j % 6 == 5 else c for j, c in enumerate(ids)]

        out.append({"prompt": torch.randn(n_prompt, MEL, generator=g), "prompt_text": text(k),
                    "text": text(chars - k), "target_frames": total - n_prompt})
    return out


class F5Sampler:
    """F5-TTS's ``CFM`` (as tools/bench_peer.py builds it) and its ``sample`` call."""

    def __init__(self, src: Path, items: list[dict]) -> None:
        dit_cls, cfm_cls = load_f5(src)
        cfm_module = sys.modules[cfm_cls.__module__]
        self.integrator = "torchdiffeq"
        if getattr(cfm_module, "odeint", None) is None:  # the loader's stand-in: no torchdiffeq
            cfm_module.odeint = _euler_odeint
            self.integrator = "stand-in Euler (torchdiffeq not installed)"
        torch.manual_seed(0)
        backbone = dit_cls(dim=DIM, depth=DEPTH, heads=HEADS, dim_head=DIM // HEADS, ff_mult=FF_MULT, mel_dim=MEL,
                           text_num_embeds=VOCAB, text_dim=TEXT_DIM, conv_layers=CONV_LAYERS)
        self.model = cfm_cls(backbone, num_channels=MEL).eval()
        _give_life(self.model)
        b = len(items)
        self.lens = torch.tensor([len(it["prompt"]) for it in items])
        self.cond = torch.zeros(b, int(self.lens.max()), MEL)
        for i, it in enumerate(items):
            self.cond[i, : len(it["prompt"])] = it["prompt"]
        texts = [torch.tensor(it["prompt_text"] + it["text"]) for it in items]
        self.text = torch.nn.utils.rnn.pad_sequence(texts, batch_first=True, padding_value=-1)
        self.duration = torch.tensor([len(it["prompt"]) + it["target_frames"] for it in items])

    def __call__(self) -> torch.Tensor:
        out, _ = self.model.sample(self.cond, self.text, self.duration, lens=self.lens, steps=STEPS,
                                   cfg_strength=CFG, sway_sampling_coef=SWAY)
        return out


def _euler_odeint(fn, y0: torch.Tensor, t: torch.Tensor, **_: object) -> torch.Tensor:
    """torchdiffeq's fixed-grid ``odeint(method="euler")``: the trajectory ``[len(t) ...]``."""
    ys, y = [y0], y0
    for t0, t1 in zip(t[:-1], t[1:], strict=True):
        y = y + (t1 - t0) * fn(t0, y)
        ys.append(y)
    return torch.stack(ys)


class FlowkitSampler:
    """flowkit's DiT of the same size and its sampler."""

    def __init__(self, text_path: str, items: list[dict], *, reference: bool = False, choose: bool = True) -> None:
        from flowkit.flow.schedules import FlowMatching
        from flowkit.flow.solvers import Euler
        from flowkit.model.dit import DiTConfig
        from flowkit.synth.sample import Utterance

        torch.manual_seed(0)
        config = DiTConfig(preset="small", dim=DIM, depth=DEPTH, heads=HEADS, ff_mult=FF_MULT, text_dim=TEXT_DIM,
                           conv_layers=CONV_LAYERS, text_path=text_path)
        self.model = config.build(MEL, VOCAB, 1).eval()
        _give_life(self.model)
        self.utterances = [Utterance(text=it["text"], prompt=it["prompt"], prompt_text=it["prompt_text"],
                                     target_frames=it["target_frames"]) for it in items]
        self.schedule, self.solver, self.reference = FlowMatching(), Euler(sway=SWAY), reference
        # as flowkit synthesize / eval do: the linear kernel faster for forward passes, measured
        # once; choose=False converts the model to the training run's default kernels instead
        self.kernels: dict[str, str] | None = None
        if not choose:
            from flowkit.converters.cpu import convert_cpu_kernels

            convert_cpu_kernels(self.model)
        else:
            from flowkit.converters.cpu import sampling_kernels

            with sampling_kernels(self.model) as choice:
                self.kernels = {**choice.kernels, "onednn_min_rows": choice.onednn_min_rows}
                self.line = choice.line()

    def __call__(self) -> torch.Tensor:
        from contextlib import nullcontext

        from flowkit.converters.cpu import sampling_kernels

        with nullcontext() if self.kernels is None else sampling_kernels(self.model, recorded=self.kernels):
            return self._sample()

    def _sample(self) -> torch.Tensor:
        from flowkit.synth.sample import inference_conditions, synthesize

        sample = synthesize
        if self.reference:
            sys.path.insert(0, str(REPO / "tests" / "synth"))
            from reference_sampler import reference_synthesize as sample
        with torch.no_grad():
            cond = inference_conditions(self.model, self.utterances, separator_ids={SPACE})
            noise = torch.randn((cond.batch_size, cond.num_frames, self.model.latent_dim),
                                generator=torch.Generator().manual_seed(0))
            return sample(self.model, cond, schedule=self.schedule, solver=self.solver, steps=STEPS,
                          cfg_strength=CFG, noise=noise)


def _give_life(model: torch.nn.Module) -> None:
    """Both networks start their adaLN gates and output at zero; small random weights there
    instead, so no kernel sees an all-zero operand (a real checkpoint has none)."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() and torch.count_nonzero(p) == 0:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def alternate(sides: dict[str, object], pairs: int) -> dict[str, float]:
    """Median seconds per call of each side, the sides alternated call by call (one warm-up each)."""
    for side in sides.values():
        side()
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for k in range(pairs):
        for name in names if k % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            sides[name]()
            times[name].append(time.perf_counter() - started)
        print("    pair " + str(k + 1) + ": " + ", ".join(f"{n} {v[-1]:.2f} s" for n, v in times.items()),
              file=sys.stderr, flush=True)
    return {name: statistics.median(v) for name, v in times.items()}


def profile_side_by_side(sides: dict[str, object], label: str, calls: int = 2, rows: int = 12) -> None:
    """Where one call of each side goes: ms per call in each of tools/bench_peer.py's
    categories (each op's self CPU time), then each side's top ``rows`` ops."""
    results = {name: breakdown(side, calls) for name, side in sides.items()}
    names = list(sides)
    print(f"\n--- where a call goes, {label}: {calls} profiled calls each, ms per call ---")
    print(f"  {'':22s}" + "".join(f" {n:>12s}" for n in names))
    for cat in CATEGORIES:
        if any(results[n][0][cat] > 0 for n in names):
            print(f"  {cat:22s}" + "".join(f" {results[n][0][cat]:12.1f}" for n in names))
    print(f"  {'profiled call':22s}" + "".join(f" {results[n][1]:12.1f}" for n in names))
    for name in names:
        print(f"--- top ops by self CPU time, {name}, {label} ---")
        print(results[name][2].key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("f5_src", type=Path, help="F5-TTS source tree (the directory holding src/f5_tts)")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--pairs", type=int, default=5, help="alternated calls per side (after one warm-up)")
    parser.add_argument("--frames", type=int, default=250, help="frames of the longest item (prompt + target)")
    parser.add_argument("--paths", nargs="+", default=["unaligned", "aligned"], choices=["unaligned", "aligned"])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference", action="store_true", help="also time flowkit's plain (reference) path")
    parser.add_argument("--training-kernels", action="store_true",
                        help="also time flowkit's sampler with the training kernels in force (no sampling choice)")
    parser.add_argument("--profile", action="store_true", help="also profile 2 calls of each side, side by side")
    args = parser.parse_args()
    for name, value in (("batch", min(args.batch)), ("pairs", args.pairs), ("frames", args.frames),
                        ("threads", args.threads)):
        if value < 1:
            parser.error(f"--{name} must be at least 1, got {value}")
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(REPO))
    for batch in args.batch:
        items = make_items(batch, args.seed, args.frames)
        f5 = F5Sampler(args.f5_src, items)
        totals = [len(it["prompt"]) + it["target_frames"] for it in items]
        print(f"batch {batch}: items of {min(totals)}-{max(totals)} frames (prompt 40 %), {STEPS} Euler steps, "
              f"sway {SWAY:g}, CFG {CFG:g}; dim {DIM}, depth {DEPTH}; torch {torch.__version__}, "
              f"{args.threads} threads; F5-TTS integrator: {f5.integrator}", flush=True)
        for text_path in args.paths:
            sides = {"F5-TTS": f5, "flowkit": FlowkitSampler(text_path, items)}
            print(f"  {text_path} sampling {sides['flowkit'].line}", flush=True)
            if args.training_kernels:
                sides["flowkit training kernels"] = FlowkitSampler(text_path, items, choose=False)
            if args.reference:
                sides["flowkit reference"] = FlowkitSampler(text_path, items, reference=True)
            med = alternate(sides, args.pairs)
            line = ", ".join(f"{name} {m * 1e3:8.1f} ms" for name, m in med.items())
            print(f"  {text_path:9s} median call: {line}; load average {os.getloadavg()[0]:.1f}", flush=True)
            print(f"  ratio flowkit/F5: {med['flowkit'] / med['F5-TTS']:.3f}  "
                  f"(batch {batch}, {text_path}; target <= 0.80)")
            if args.reference:
                print(f"  ratio flowkit/reference: {med['flowkit'] / med['flowkit reference']:.3f}")
            if args.training_kernels:
                print(f"  ratio flowkit/training kernels: {med['flowkit'] / med['flowkit training kernels']:.3f}")
            if args.profile:
                profile_side_by_side({"F5-TTS": f5, "flowkit": sides["flowkit"]}, f"batch {batch}, {text_path}")


if __name__ == "__main__":
    from flowkit.config import one_line
    from flowkit.errors import FlowkitError

    try:
        main()
    except FlowkitError as error:  # a bad store, config or checkpoint path: one line, as flowkit's commands say it
        print(f"{Path(__file__).name}: {one_line(error)}", file=sys.stderr)
        sys.exit(error.exit_code)
