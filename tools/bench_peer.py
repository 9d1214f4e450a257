"""One training step of F5-TTS's own CFM + DiT against flowkit's DiT of the same size, side by side.

Both models have dim 256, depth 4, 4 heads of 64, feed-forward x2, text dim 128 and two
ConvNeXt text layers (``--text-dim``, ``--conv-layers``), dropout 0.1 and take 100-dim mel frames; each step is one
forward + backward + AdamW update of a batch of ``--batch`` items of ``--frames`` frames
(no padding: F5-TTS trains without an attention mask, its issue #1118). flowkit runs its
unaligned (F5-TTS) and its aligned (E11) text path against the same F5-TTS step. Each side
sets up its optimizer as its own trainer does (F5-TTS: ``AdamW(model.parameters())``;
flowkit: `flowkit.train.optimization.build_optimizer`, fused AdamW, and the training loop's
multi-tensor gradient clipping). The two sides alternate step by step in one process, so
load from other processes affects both.

F5-TTS is read from its source tree (e.g. a checkout of SWivid/F5-TTS); its audio front end
(torchaudio, librosa mel) and tokenisers are never called in a training step from latents,
so stand-in modules replace the packages this environment lacks. It needs
``pip install x_transformers einops`` (for this tool only; flowkit does not depend on them).

    .venv/bin/python tools/bench_peer.py F5_SRC_DIR [--pairs 10] [--profile]
    .venv/bin/python tools/bench_peer.py F5_SRC_DIR --text-dim 256 --conv-layers 4   # the other side-by-side
    .venv/bin/python tools/bench_peer.py F5_SRC_DIR --conv-kernels   # flowkit's step per grouped-conv kernel

Prints the median step of each side and ``ratio flowkit/F5: X`` per text path (target <= 0.80),
then the roofline of flowkit's step: its model FLOPs (`flowkit.model.flops.train_step_flops`),
the FLOP/s it achieves, and the machine's GEMM rate measured in the same run at the step's
own linear-layer shapes (forward ``X W^T`` and the two backward products, through MKL's
``torch.mm`` and through the kernel flowkit's layers use, the faster counted): the step's
share of that rate (target >= 80 %) and where the rest of the step goes (the GEMMs at that
rate against attention, convolutions, element-wise work and the optimizer). Then the share's
ceiling: attention's own rate, measured in the same run (the fused SDPA kernel, forward and
backward, at the step's ``[b h n hd]``), the time the counted work alone would take (block
GEMMs and the other counted products at the GEMM rate, attention at its rate), the share
that allows, and what 80 % would leave for the work that carries no counted FLOPs.

Before the first step each flowkit side chooses its CPU kernels as ``flowkit train`` does
(`flowkit.converters.cpu.choose_cpu_kernels`, measured at the model's shapes unless
``FLOWKIT_CPU_LINEAR`` / ``FLOWKIT_CPU_GROUPED_CONV`` fix them) and prints the
``cpu kernels: ...`` line. ``--profile`` profiles 3 more steps of each flowkit side and prints
where its step goes (`breakdown`): block GEMMs, attention, convolutions, element-wise work,
the loss, the optimizer (clipping + AdamW + zero_grad), copies and fills, autograd and
Python, in ms per step and share of the profiled step; then torch's top-10 op table.
``--conv-kernels`` then times flowkit's step with each grouped-convolution kernel in force
(torch's, oneDNN channels-first, oneDNN channels-last), alternated step by step.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
import types
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
DIM, DEPTH, HEADS, FF_MULT, TEXT_DIM, CONV_LAYERS, MEL, VOCAB, DROPOUT = 256, 4, 4, 2, 128, 2, 100, 100, 0.1


def load_f5(src: Path) -> tuple[type, type]:
    """``(DiT, CFM)`` classes from an F5-TTS source tree, without its package ``__init__``s
    (they import the trainer, datasets and audio I/O) and with stand-ins for modules that a
    training step from mel frames never calls."""
    root = src / "src" / "f5_tts"
    if not (root / "model" / "backbones" / "dit.py").is_file():
        raise SystemExit(f"{src} is not an F5-TTS source tree (no src/f5_tts/model/backbones/dit.py)")
    for name in ("torchaudio", "torchdiffeq", "rjieba", "pypinyin"):
        try:
            importlib.import_module(name)
        except ImportError:
            fake = types.ModuleType(name)
            fake.odeint = None  # torchdiffeq: sampling only
            fake.Style = None  # pypinyin: tokenisation only
            fake.lazy_pinyin = None
            sys.modules[name] = fake
    for pkg, path in (("f5_tts", root), ("f5_tts.model", root / "model"),
                      ("f5_tts.model.backbones", root / "model" / "backbones")):
        module = types.ModuleType(pkg)
        module.__path__ = [str(path)]
        sys.modules[pkg] = module
    dit = importlib.import_module("f5_tts.model.backbones.dit")
    cfm = importlib.import_module("f5_tts.model.cfm")
    return dit.DiT, cfm.CFM


def make_data(batch: int, frames: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    n_chars = [int(x) for x in torch.randint(frames // 4, frames // 2, (batch,), generator=g)]
    return {
        "mel": torch.randn(batch, frames, MEL, generator=g),
        "chars": [torch.randint(3, VOCAB, (k,), generator=g) for k in n_chars],
        "target": [(int(s), frames) for s in torch.randint(0, int(frames * 0.3), (batch,), generator=g)],
    }


class F5Side:
    def __init__(self, dit_cls: type, cfm_cls: type, data: dict, text_dim: int = TEXT_DIM,
                 conv_layers: int = CONV_LAYERS) -> None:
        torch.manual_seed(0)
        backbone = dit_cls(dim=DIM, depth=DEPTH, heads=HEADS, dim_head=DIM // HEADS, ff_mult=FF_MULT, mel_dim=MEL,
                           text_num_embeds=VOCAB, text_dim=text_dim, conv_layers=conv_layers, dropout=DROPOUT)
        self.model = cfm_cls(backbone, num_channels=MEL)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.mel = data["mel"]
        self.text = torch.nn.utils.rnn.pad_sequence(data["chars"], batch_first=True, padding_value=-1)
        self.lens = torch.full((self.mel.shape[0],), self.mel.shape[1], dtype=torch.long)

    def step(self) -> None:
        loss, _, _ = self.model(self.mel, self.text, lens=self.lens)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


class FlowkitSide:
    def __init__(self, text_path: str, data: dict, text_dim: int = TEXT_DIM, conv_layers: int = CONV_LAYERS) -> None:
        from flowkit.flow.schedules import FlowMatching
        from flowkit.flow.t_samplers import Uniform
        from flowkit.losses import MaskedMSE
        from flowkit.model.dit import DiTConfig
        from flowkit.train.objective import loss_names
        from flowkit.train.optimization import build_optimizer

        torch.manual_seed(0)
        config = DiTConfig(preset="small", dim=DIM, depth=DEPTH, heads=HEADS, ff_mult=FF_MULT, text_dim=text_dim,
                           conv_layers=conv_layers, dropout=DROPOUT, text_path=text_path)
        self.model = config.build(MEL, VOCAB, 1)
        from flowkit.converters.cpu import choose_cpu_kernels, convert_cpu_kernels

        self.kernels = choose_cpu_kernels(self.model)  # as flowkit train does before its first step
        convert_cpu_kernels(self.model, self.kernels.kernels)
        # flowkit's own optimizer (flowkit.train.run): AdamW, fused on the CPU too
        self.opt = build_optimizer(self.model, lr=1e-4, betas=(0.9, 0.999), weight_decay=0.01,
                                   device=torch.device("cpu"))
        self.schedule, self.t_sampler, self.losses = FlowMatching(), Uniform(), [MaskedMSE()]
        if text_path == "aligned":
            from flowkit.losses import DurationL1

            self.losses.append(DurationL1())
        self.names = loss_names(self.losses)
        self.losses = [_Labelled(loss, "bench.loss") for loss in self.losses]  # for the profile's "the loss"
        self.x1, self.cond = self._conditions(data, text_path == "aligned")
        self.generator = torch.Generator().manual_seed(1)

    @staticmethod
    def _conditions(data: dict, aligned: bool):
        from flowkit.model.conditions import Conditions

        mel, chars = data["mel"], data["chars"]
        b, n, _ = mel.shape
        nt = max(len(c) for c in chars)
        text = torch.zeros(b, nt, dtype=torch.long)
        text_mask = torch.zeros(b, nt, dtype=torch.bool)
        target = torch.zeros(b, n, dtype=torch.bool)
        extra = {}
        if aligned:  # one unit per 5 characters, frames split evenly among the units
            n_units = (nt + 4) // 5
            extra = {"char_unit": torch.full((b, nt), -1), "unit_frames": torch.zeros(b, n_units, 2, dtype=torch.long),
                     "unit_mask": torch.zeros(b, n_units, dtype=torch.bool)}
        for i, c in enumerate(chars):
            text[i, : len(c)], text_mask[i, : len(c)] = c, True
            target[i, data["target"][i][0] : data["target"][i][1]] = True
            if aligned:
                u = (len(c) + 4) // 5
                extra["char_unit"][i, : len(c)] = torch.arange(len(c)) // 5
                edges = torch.linspace(0, n, u + 1).long()
                extra["unit_frames"][i, :u] = torch.stack([edges[:-1], edges[1:]], dim=-1)
                extra["unit_mask"][i, :u] = True
        zeros = torch.zeros(b, dtype=torch.long)
        frame = torch.ones(b, n, dtype=torch.bool)
        cond = Conditions(
            frame_mask=frame, target_mask=target, prompt=mel * (~target)[..., None], text=text, text_mask=text_mask,
            language=zeros, emotion=zeros, intensity=torch.zeros(b), emotion_known=zeros.bool(), rate=zeros,
            loudness=zeros, drop_text=zeros.bool(), drop_prompt=zeros.bool(), **extra,
        )
        return mel, cond

    def step(self) -> None:
        from flowkit.train.objective import draw_flow, loss_terms, unit_sums, unit_weighted

        # the calls flowkit's training step makes (flowkit.train.loop.TrainingLoop.train_step)
        t, x0 = draw_flow(self.x1.shape, self.t_sampler, self.generator)
        self.model.train()
        named, _ = loss_terms(self.model, self.schedule, self.losses, self.names, self.x1, self.cond, t, x0,
                              autocast=False)
        shares = unit_weighted(named, {k: max(v, 1.0) for k, v in unit_sums([self.cond]).items()})
        sum((term.weight * shares[term.name] for term in named), torch.zeros(())).backward()
        with torch.profiler.record_function("bench.optimizer"):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, foreach=True)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)


class _Labelled:
    """A loss whose calls run inside a profiler range named ``label`` (same ``weight``)."""

    def __init__(self, loss, label: str) -> None:
        self.loss, self.label, self.weight = loss, label, float(getattr(loss, "weight", 1.0))

    def __call__(self, inputs):
        with torch.profiler.record_function(self.label):
            return self.loss(inputs)


def _best_seconds(fn, reps: int) -> float:
    """The fastest of ``reps`` timed calls of ``fn`` after one warm-up: the rate the
    machine attains at that shape (a median would fold other processes' load into the
    rate and flatter the step's share)."""
    fn()  # warm-up (kernel selection, allocation)
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def _three_products(mm, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor, reps: int) -> float:
    """Seconds of a linear layer's three products with ``mm(a, b) = a @ b^T``: forward
    ``x w^T``, input gradient ``dy w`` and weight gradient ``dy^T x``."""
    w_t, dy_t, x_t = w.t().contiguous(), dy.t().contiguous(), x.t().contiguous()
    with torch.no_grad():
        return (_best_seconds(lambda: mm(x, w), reps) + _best_seconds(lambda: mm(dy, w_t), reps)
                + _best_seconds(lambda: mm(dy_t, x_t), reps))


def gemm_rate(tokens: int, reps: int = 5) -> tuple[float, float, str]:
    """``(GEMM FLOPs, seconds, kernel)`` of one step's block linear layers at this machine's
    best kernel: per block 4 ``[T c] x [c c]`` products (q, k, v, out) and the feed-forward
    ``[T c] x [c f c]``, ``[T f c] x [f c c]``, each forward, input gradient and weight
    gradient (`_three_products`); ``T = tokens``. Timed through ``torch.mm`` (MKL) and
    oneDNN's (`flowkit.converters.cpu_kernels`, where this torch build has it); the faster of the
    two is the machine's rate at these shapes."""
    from flowkit.converters import cpu_kernels

    shapes = [(DIM, DIM)] * 4 + [(DIM, FF_MULT * DIM), (FF_MULT * DIM, DIM)]
    g = torch.Generator().manual_seed(0)
    mms = {"mkl": lambda a, b: torch.mm(a, b.t())}
    if cpu_kernels.onednn_linear_kernel() is not None:
        mms["onednn"] = cpu_kernels.onednn_mm
    flops, kernels = 0.0, dict.fromkeys(mms, 0.0)
    for k_in, k_out in dict.fromkeys(shapes):
        count = shapes.count((k_in, k_out)) * DEPTH
        x, w, dy = (torch.randn(tokens, k_in, generator=g), torch.randn(k_out, k_in, generator=g),
                    torch.randn(tokens, k_out, generator=g))
        flops += count * 3 * 2.0 * tokens * k_in * k_out
        for name, mm in mms.items():
            kernels[name] += count * _three_products(mm, x, w, dy, reps)
    best = min(kernels, key=kernels.get)
    return flops, kernels[best], best


def attention_rate(batch: int, frames: int, reps: int = 5) -> tuple[float, float]:
    """``(attention FLOPs, seconds)`` of one step's self-attention at this machine's fused
    kernel: ``F.scaled_dot_product_attention`` forward and backward on ``[b h n hd]`` views
    of frames-major ``[b n h hd]`` tensors, as `flowkit.model.attention.Attention` calls it,
    once per block. FLOPs as `flowkit.model.flops` counts them: ``4 n² c`` per item and
    forward (``QKᵀ`` and ``AV``), three forwards per step."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, frames, HEADS, DIM // HEADS, generator=g).transpose(1, 2).requires_grad_(True)
               for _ in range(3))
    grad = torch.randn(batch, HEADS, frames, DIM // HEADS, generator=g)

    def once() -> None:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        q.grad = k.grad = v.grad = None
        out.backward(grad)

    flops = DEPTH * 3 * 4.0 * DIM * batch * frames * frames
    return flops, DEPTH * _best_seconds(once, reps)


def roofline(model: torch.nn.Module, data: dict, text_path: str, median_s: float) -> None:
    """Print the step's model FLOPs, achieved FLOP/s and share of the machine's GEMM rate,
    then the share's ceiling: the counted work alone (the block GEMMs and every other
    counted product at the GEMM rate, attention at its fused kernel's measured rate, both
    measured in this run) against the step, and what a share of 80 % leaves for the
    uncounted work (element-wise, copies, the optimizer, autograd)."""
    from flowkit.model.flops import train_step_flops

    b, n, _ = data["mel"].shape
    chars = [len(c) for c in data["chars"]] if text_path == "aligned" else None
    step_flops = train_step_flops(model, [n] * b, chars)
    gemm_flops, gemm_s, kernel = gemm_rate(b * n)
    attn_flops, attn_s = attention_rate(b, n)
    rate = gemm_flops / gemm_s
    achieved = step_flops / median_s
    print(f"roofline ({text_path}): step {step_flops / 1e9:.1f} GFLOP "
          f"(block GEMMs {gemm_flops / step_flops:.0%} of it), "
          f"achieved {achieved / 1e9:.0f} GFLOP/s; machine GEMM rate at the step's shapes {rate / 1e9:.0f} GFLOP/s "
          f"({kernel}); share {achieved / rate:.0%} (target >= 80 %)")
    print(f"  time: block GEMMs at that rate {gemm_s * 1e3:.0f} ms of the {median_s * 1e3:.0f} ms step; the other "
          f"{(median_s - gemm_s) * 1e3:.0f} ms: attention, convolutions, the input and text layers' products, "
          f"element-wise work, copies, the loss, the optimizer, autograd")
    other_flops = step_flops - gemm_flops - attn_flops
    counted_s = gemm_s + attn_s + other_flops / rate
    at_target_s = step_flops / (0.8 * rate)
    print(f"  ceiling: attention (SDPA forward + backward at [{b} {HEADS} {n} {DIM // HEADS}], {DEPTH} blocks) runs at "
          f"{attn_flops / attn_s / 1e9:.0f} GFLOP/s, {attn_flops / 1e9:.1f} GFLOP in {attn_s * 1e3:.0f} ms; with the "
          f"block GEMMs and the other {other_flops / 1e9:.1f} GFLOP at the GEMM rate, the counted work alone takes "
          f"{counted_s * 1e3:.0f} ms: share at most {step_flops / counted_s / rate:.0%}")
    print(f"  at 80 % the step takes {at_target_s * 1e3:.0f} ms, leaving {(at_target_s - counted_s) * 1e3:.0f} ms for "
          f"the uncounted work (element-wise, copies, the optimizer, autograd); now the step less the counted work "
          f"at those rates is ~{(median_s - counted_s) * 1e3:.0f} ms (that work, and any product slower in the step "
          f"than measured apart: the convolutions above all)")


def n_params(model: torch.nn.Module) -> float:
    return sum(p.numel() for p in model.parameters()) / 1e6


CATEGORIES = (
    "block GEMMs", "attention (SDPA)", "convolutions", "element-wise", "the loss", "optimizer", "copies and fills",
    "autograd and Python",
)
_RANGES = {"bench.loss": "the loss", "bench.optimizer": "optimizer"}
_GEMM = ("mkldnn::_linear_pointwise", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
_COPIES = ("aten::copy_", "aten::cat", "aten::clone", "aten::contiguous", "aten::constant_pad_nd", "aten::fill_",
           "aten::zero_", "aten::index", "aten::index_select", "aten::stack", "aten::_to_copy", "aten::masked_fill_",
           "aten::where", "aten::index_put_", "aten::gather", "aten::scatter_add_", "aten::embedding_dense_backward",
           "aten::embedding", "aten::flip", "aten::repeat", "aten::pad")


def category(name: str, ranges: tuple[str, ...]) -> str:
    """The `CATEGORIES` entry of one profiled op (its name; ``ranges``: the bench's profiler
    ranges it runs inside, innermost first)."""
    for label in ranges:
        if label in _RANGES:
            return _RANGES[label]
    if name in _GEMM:
        return "block GEMMs"
    if "scaled_dot_product" in name or "flash_attention" in name:
        return "attention (SDPA)"
    if "conv" in name or name in ("aten::im2col", "aten::col2im"):
        return "convolutions"
    if name in _COPIES:
        return "copies and fills"
    if name.startswith(("aten::", "mkldnn::")):
        return "element-wise"
    return "autograd and Python"


def breakdown(step, steps: int = 3) -> tuple[dict[str, float], float, object]:
    """``({category: ms per step}, profiled ms per step, profiler)`` of ``steps`` steps: each
    op's self CPU time (`category`), and the step's wall time outside every op under
    "autograd and Python". Block GEMMs are the linear layers' products (the attention's own
    products are inside SDPA, the convolutions' inside "convolutions")."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        for _ in range(steps):
            step()
        wall_ms = (time.perf_counter() - started) * 1e3 / steps
    ms = dict.fromkeys(CATEGORIES, 0.0)
    for event in prof.events():
        if event.name in _RANGES:
            continue
        ranges, parent = [], event.cpu_parent
        while parent is not None:
            ranges.append(parent.name)
            parent = parent.cpu_parent
        ms[category(event.name, tuple(ranges))] += event.self_cpu_time_total / 1e3 / steps
    ms["autograd and Python"] += max(0.0, wall_ms - sum(ms.values()))
    return ms, wall_ms, prof


def profile(name: str, step, median_s: float, steps: int = 3, rows: int = 10) -> None:
    ms, wall_ms, prof = breakdown(step, steps)
    print(f"\n--- where the step goes, {name}: {steps} profiled steps of {wall_ms:.0f} ms "
          f"(median unprofiled {median_s * 1e3:.0f} ms) ---")
    print(f"  {'':22s} {'ms/step':>9s} {'share':>6s} {'at the median':>14s}")
    for cat in CATEGORIES:
        print(f"  {cat:22s} {ms[cat]:9.1f} {ms[cat] / wall_ms:6.1%} {ms[cat] / wall_ms * median_s * 1e3:11.1f} ms")
    print(f"--- top ops by self CPU time, {name} ---")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def conv_kernels(fk: FlowkitSide, text_path: str, steps: int) -> None:
    """flowkit's median step with each grouped-convolution kernel in force, the kernels
    alternated step by step (one warm-up each, `flowkit.converters.cpu._median_ms`); the
    measured choice is put back after."""
    from flowkit.converters.cpu import KERNELS, _median_ms, convert_cpu_kernels, converted_kernels

    def step_with(kernel: str):
        def once() -> None:
            convert_cpu_kernels(fk.model, {"grouped_conv": kernel})
            fk.step()
        return once

    chosen = converted_kernels(fk.model)["grouped_conv"]
    try:
        med = _median_ms({k: step_with(k) for k in KERNELS["grouped_conv"]}, steps)
    finally:
        convert_cpu_kernels(fk.model, {"grouped_conv": chosen})
    line = ", ".join(f"{k} {m:.1f} ms ({m / med['torch']:.3f})" for k, m in med.items())
    print(f"{text_path:9s}: flowkit step per grouped-conv kernel (x torch's): {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("f5_src", type=Path, help="F5-TTS source tree (the directory holding src/f5_tts)")
    parser.add_argument("--pairs", type=int, default=10, help="alternated step pairs per text path (after 2 warm-up)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--frames", type=int, default=400)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="also profile 3 steps of each flowkit side")
    parser.add_argument("--conv-kernels", action="store_true",
                        help="also time flowkit's step with each grouped-convolution kernel, alternated")
    parser.add_argument("--text-dim", type=int, default=TEXT_DIM, help=f"text embedding width (default {TEXT_DIM}; "
                        f"the other side-by-side: {DIM}, the model's)")
    parser.add_argument("--conv-layers", type=int, default=CONV_LAYERS,
                        help=f"ConvNeXt text layers (default {CONV_LAYERS}; the other side-by-side: 4, F5-TTS's own)")
    args = parser.parse_args()
    for name in ("pairs", "batch", "frames", "threads", "text_dim", "conv_layers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.frames < 4:
        parser.error(f"--frames must be at least 4 (a quarter of them is the shortest text), got {args.frames}")
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(REPO))
    dit_cls, cfm_cls = load_f5(args.f5_src)
    data = make_data(args.batch, args.frames, seed=0)
    f5 = F5Side(dit_cls, cfm_cls, data, text_dim=args.text_dim, conv_layers=args.conv_layers)
    print(f"batch {args.batch} x {args.frames} frames of {MEL}-dim mel, dim {DIM}, depth {DEPTH}, heads {HEADS}, "
          f"text dim {args.text_dim}, {args.conv_layers} text conv layers, "
          f"torch {torch.__version__}, {args.threads} threads; F5-TTS {n_params(f5.model):.2f}M parameters")
    for text_path in ("unaligned", "aligned"):
        fk = FlowkitSide(text_path, data, text_dim=args.text_dim, conv_layers=args.conv_layers)
        print(f"{text_path:9s}: {fk.kernels.line()}")
        for _ in range(2):
            f5.step()
            fk.step()
        t_f5, t_fk = [], []
        for k in range(args.pairs):
            order = [(f5, t_f5), (fk, t_fk)] if k % 2 == 0 else [(fk, t_fk), (f5, t_f5)]
            for side, times in order:
                started = time.perf_counter()
                side.step()
                times.append(time.perf_counter() - started)
        m_f5, m_fk = statistics.median(t_f5), statistics.median(t_fk)
        print(f"{text_path:9s}: flowkit {n_params(fk.model):.2f}M parameters, median step {m_fk * 1e3:7.1f} ms; "
              f"F5-TTS {m_f5 * 1e3:7.1f} ms")
        print(f"ratio flowkit/F5: {m_fk / m_f5:.3f}  ({text_path}; target <= 0.80)")
        roofline(fk.model, data, text_path, m_fk)
        if args.profile:
            profile(f"flowkit {text_path}", fk.step, m_fk)
        if args.conv_kernels:
            conv_kernels(fk, text_path, args.pairs)


if __name__ == "__main__":
    from flowkit.config import one_line
    from flowkit.errors import FlowkitError

    try:
        main()
    except FlowkitError as error:  # a bad store, config or checkpoint path: one line, as flowkit's commands say it
        print(f"{Path(__file__).name}: {one_line(error)}", file=sys.stderr)
        sys.exit(error.exit_code)
