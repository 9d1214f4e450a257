"""One command that checks a GPU for flowkit: throughput, memory, and bit-identical resume.

On one CUDA device (at most about 5 minutes) it prints, for the f5_base model in bf16 at
the production budget (38,400 frames, items of 100-1,000 frames packed into rows):
frames/s, TFLOPS and MFU (against the device's bf16 peak, `flowkit.model.flops`) for the
eager and the compiled model, the peak memory next to the step-0 estimate, and then
trains a small run 20 steps, kills it (SIGKILL) after step 10's checkpoint, resumes it
and checks the weights equal an uninterrupted run's bit for bit.

Without CUDA (or with ``--tiny``) it runs the same checks with the tiny preset and a
small budget on the CPU; CI runs it that way (tests/tools/test_gpu_check.py).

    .venv/bin/python tools/gpu_check.py [--tiny] [--steps 10] [--no-compile]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "train"))


def synthetic_batch(budget: int, latent_dim: int, vocab: int, device: torch.device, seed: int = 0):
    """Items of 100-1,000 frames up to ``budget`` real frames, as the trainer would collate them."""
    from flowkit.model.conditions import Conditions
    from flowkit.model.packing import PackLayout

    g = torch.Generator().manual_seed(seed)
    lengths: list[int] = []
    while True:
        n = int(torch.randint(100, 1001, (1,), generator=g))
        if sum(lengths) + n > budget or len(lengths) == 64:
            break
        lengths.append(n)
    b, n = len(lengths), max(lengths)
    chars = [max(1, k // 5) for k in lengths]
    frame = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    target = frame & (torch.arange(n)[None, :] >= (torch.tensor(lengths) * 0.3).long()[:, None])
    nt = max(chars)
    text_mask = torch.arange(nt)[None, :] < torch.tensor(chars)[:, None]
    x1 = torch.randn(b, n, latent_dim, generator=g) * frame[..., None]
    zeros = torch.zeros(b, dtype=torch.long)
    cond = Conditions(
        frame_mask=frame, target_mask=target, prompt=x1 * (frame & ~target)[..., None],
        text=torch.randint(1, vocab, (b, nt), generator=g) * text_mask, text_mask=text_mask,
        language=zeros, emotion=zeros, intensity=torch.zeros(b), emotion_known=zeros.bool(), rate=zeros,
        loudness=zeros, drop_text=zeros.bool(), drop_prompt=zeros.bool(), layout=PackLayout.plan(lengths),
    )
    return x1.to(device), cond.to(device), lengths


def throughput(preset: str, budget: int, device: torch.device, steps: int, compiled: bool) -> dict[str, float]:
    from flowkit.flow.schedules import FlowMatching
    from flowkit.model.dit import DiTConfig
    from flowkit.model.flops import peak_tflops, train_step_flops
    from flowkit.train.memory import estimate_memory

    torch.manual_seed(0)
    latent_dim, vocab = 100, 256
    model = DiTConfig(preset=preset).build(latent_dim, vocab, 1).to(device).train()
    if compiled:
        model.compile_blocks()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    x1, cond, lengths = synthetic_batch(budget, latent_dim, vocab, device)
    schedule, autocast = FlowMatching(), device.type == "cuda"
    flops = train_step_flops(model, lengths, padded_frames=cond.frame_mask.numel())
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    def step() -> None:
        t = torch.rand(x1.shape[0], device=device)
        x0 = torch.randn_like(x1)
        x_t, target = schedule.sample(x0, x1, t)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            out = model(x_t, t, cond).output
        loss = ((out.float() - target) ** 2 * cond.target_mask[..., None]).sum() / cond.target_mask.sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    times = []
    for k in range(steps + 2):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if k >= 2:  # warm-up (and compilation) first
            times.append(time.perf_counter() - started)
    step_s = statistics.median(times)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = peak_tflops(name) if device.type == "cuda" else None
    est = estimate_memory(model, lengths, padded_frames=cond.frame_mask.numel(), autocast=autocast)
    tflops = flops / step_s / 1e12
    return {
        "frames_per_s": sum(lengths) / step_s, "tflops": tflops, "mfu": tflops / peak if peak else float("nan"),
        "step_ms": step_s * 1e3, "items": len(lengths), "frames": sum(lengths),
        "peak_mem_gb": torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else float("nan"),
        "estimate_gb": est.gb(),
    }


def kill_and_resume(device: str, tmp: Path) -> bool:
    """20 steps uninterrupted vs killed after step 10's checkpoint and resumed: equal weights?"""
    from conftest import write_store  # the tests' synthetic store writer
    from state_compare import assert_same_tensors, final_state

    store = write_store(tmp / "store.zarr")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    bindings = ["model.dit.preset = 'tiny'", "Trainer.save_every = 5", "Trainer.eval_every = None",
                "Trainer.loggers = []", "batch_sampler.frame_budget.frame_budget = 600"]

    def argv(out: Path) -> list[str]:
        return [sys.executable, "-m", "flowkit", "train", str(REPO / "gin" / "debug.gin"),
                *[x for b in bindings for x in ("-b", b)], "--data", str(store), "--out", str(out),
                "--steps", "20", "--device", device]

    subprocess.run(argv(tmp / "ref"), check=True, env=env, capture_output=True, cwd=REPO)
    proc = subprocess.Popen(argv(tmp / "killed"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=REPO)
    marker = tmp / "killed" / "checkpoints" / "step-00000010" / "COMPLETE"
    deadline = time.monotonic() + 240
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    subprocess.run([sys.executable, "-m", "flowkit", "resume", str(tmp / "killed"), "--device", device],
                   check=True, env=env, capture_output=True, cwd=REPO)
    try:
        a, b = final_state(tmp / "ref"), final_state(tmp / "killed")
        assert_same_tensors(a["model"], b["model"])
        assert_same_tensors(a["ema"], b["ema"])
    except AssertionError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="tiny preset, small budget (the CPU/CI mode)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps after 2 warm-up steps")
    parser.add_argument("--no-compile", action="store_true", help="skip the compiled model")
    args = parser.parse_args()
    cuda = torch.cuda.is_available() and not args.tiny
    device = torch.device("cuda" if cuda else "cpu")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    preset, budget = ("f5_base", 38_400) if cuda else ("tiny", 2_000)
    print(f"device {torch.cuda.get_device_name(device) if cuda else 'cpu'}, torch {torch.__version__}, "
          f"preset {preset}, budget {budget} frames{', bf16 autocast' if cuda else ''}")
    modes = [False] if args.no_compile else [False, True]
    for compiled in modes:
        r = throughput(preset, budget, device, args.steps, compiled)
        print(f"{'compiled' if compiled else 'eager':8s}: {r['items']} items / {r['frames']} frames, "
              f"step {r['step_ms']:.1f} ms, "
              f"frames/s {r['frames_per_s']:.0f}, TFLOPS {r['tflops']:.3f}, MFU {r['mfu']:.3f}, "
              f"peak memory {r['peak_mem_gb']:.2f} GB (estimate {r['estimate_gb']:.2f} GB)")
    with tempfile.TemporaryDirectory() as tmp:
        same = kill_and_resume(device.type, Path(tmp))
    print(f"kill -9 after step 10, resume to 20: weights bit-identical: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
