"""Trainer overhead on the CPU: a trainer step against a bare PyTorch loop, and data stall.

Both loops train the same tiny DiT on the same fixed batch (flow loss, AdamW, clipping);
the trainer's step adds EMA, the lr schedule, micro-batch weighting and its one sync. The
data stall is the share of a real trainer step (pairing, reads from a zarr store,
collation) spent before the forward pass. Prints medians; targets: ratio <= 1.05, stall < 5 %.

    .venv/bin/python tools/bench_trainer.py [--steps 30] [--preset tiny]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "train"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--preset", default="small")
    args = parser.parse_args()

    from conftest import write_store  # the tests' synthetic store writer

    from flowkit.train import loop as trainer_mod
    from flowkit.train import run

    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(Path(tmp) / "bench.zarr", per_speaker=40, latent_dim=80)
        captured = {}
        original_run = trainer_mod.TrainingLoop.run

        def capture(self):  # take the built trainer, do not train
            captured["trainer"] = self
            return "completed"

        trainer_mod.TrainingLoop.run = capture
        try:
            run.train([REPO / "gin" / "debug.gin"], [
                f"model.dit.preset = '{args.preset}'", "Trainer.loggers = []", "Trainer.eval_every = None",
                "batch_sampler.frame_budget.frame_budget = 2000", "batch_sampler.frame_budget.max_items = 16",
            ], data=[store], out=Path(tmp) / "run", steps=10**6, device="cpu")
        finally:
            trainer_mod.TrainingLoop.run = original_run
        tr = captured["trainer"]
        batches, _ = tr.next_batches()
        batch = batches[0]

        # Data stall: real steps (a new batch from the store each time).
        stall = []
        for _ in range(args.steps):
            stats = tr.train_step(tr.set_lr())
            stall.append(stats.data_s / stats.step_s)

        # Trainer step and bare step on the same fixed batch, interleaved so that load from
        # other processes affects both alike.
        tr._overfit = [batch]
        model, schedule = tr.model, tr.settings.schedule
        loss_fn = tr.settings.losses[0]
        from flowkit.losses import LossInputs

        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        generator = torch.Generator().manual_seed(0)

        def bare_step() -> None:  # AdamW + clipping only
            t = torch.rand(batch.x1.shape[0], generator=generator)
            x0 = torch.randn(batch.x1.shape, generator=generator)
            x_t, target = schedule.sample(x0, batch.x1, t)
            out = model(x_t, t, batch.cond)
            loss = loss_fn(LossInputs(out.output, target, x0, batch.x1, x_t, t, batch.cond, schedule)).value
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

        trainer_times, bare_times = [], []
        for _ in range(args.steps):
            started = time.perf_counter()
            tr.train_step(tr.set_lr())
            trainer_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            bare_step()
            bare_times.append(time.perf_counter() - started)

    skip = max(1, args.steps // 5)  # warm-up steps
    trainer_med = statistics.median(trainer_times[skip:])
    bare_med = statistics.median(bare_times[skip:])
    print(f"model preset {args.preset}, batch {tuple(batch.x1.shape)}, {args.steps} steps, torch threads {torch.get_num_threads()}")
    print(f"bare loop step   median {bare_med * 1e3:8.2f} ms")
    print(f"trainer step     median {trainer_med * 1e3:8.2f} ms")
    print(f"ratio trainer/bare: {trainer_med / bare_med:.3f}  (target <= 1.05)")
    print(f"data stall share: median {statistics.median(stall[skip:]) * 100:.2f} %  (target < 5 %)")


if __name__ == "__main__":
    main()
