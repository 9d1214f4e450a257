"""Trainer overhead on the CPU: a trainer step against a bare PyTorch loop, and data stall.

Both loops train the same DiT (``--preset``, default small) on the same fixed batch (flow
loss, AdamW, clipping); the trainer's step adds EMA, the lr schedule, micro-batch weighting
and its one sync. The data share is the share of a real CPU trainer step (pairing, reads
from a zarr store, collation) spent before the forward pass, batches built in the step
itself. Prints medians; targets: ratio <= 1.02, data share < 5 % (the < 1 % target is
``--corpus``'s stall at a 10 ms step, below).

    .venv/bin/python tools/bench_trainer.py [--steps 30] [--preset small] [--corpus STORE [--stall-steps 200]]
    .venv/bin/python tools/bench_trainer.py --short-run STORE [--short-config e13_dur_emotion.gin] [--short-steps 2]

With ``--corpus STORE`` (the shared corpus prepared with ``flowkit prepare ... --align
energy``) it also prints, at the production budget (38,400 frames, 64 items) for base.gin
(in-clip pairing) and e13_dur_emotion.gin (cross-segment pairing, aligned path): the
padding share of the padded batch and of the packed rows the transformer runs on
(``padding share: X %``, target < 2 %), the median and 90th percentile of one batch
build (``batch build: ...``), and ``data stall at a 10 ms step: X %`` -- the share of time
a training thread that needs 10 ms per step (a GPU) waits for its next batch, with the
batches built in a background thread up to ``Trainer.prefetch_steps`` steps ahead
(target < 1 %), with the longest wait and the page faults of the prefetched builds (a
build that faults its arrays in afresh is a long one: flowkit/batching/host_memory.py),
with one build thread under Python's automatic garbage collection and under the trainer's
(``Trainer.gc_every``: flowkit/train/collection.py), and with ``Trainer.batch_workers``
build threads (the machine's default) when that is more than one.
With ``--short-run STORE`` it instead times ``flowkit train CONFIG --data STORE --steps 2``
in this process and prints where the time went: the memory check, the evaluation passes
(their count and seconds), the training steps, the saves.
It first keeps freed memory in the process, as ``flowkit train`` does. Say the machine's
load (``uptime``) with the figures: on a busy machine a build waits for a core.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "train"))


def corpus_figures(store: Path, steps: int, bindings: list[str]) -> None:
    """Padding shares and the data stall at a simulated 10 ms step, per experiment."""
    import numpy as np

    from flowkit import config as gin_config
    from flowkit.batching.builder import BatchBuilder
    from flowkit.batching.collate import CFGDrop
    from flowkit.batching.prefetch import StepPrefetcher
    from flowkit.batching.samplers import BatchStream
    from flowkit.data.dataset import LatentDataset
    from flowkit.data.stats import compute_latent_stats
    from flowkit.model.packing import PackLayout
    from flowkit.train.collection import GarbageCollection
    from flowkit.train.settings import Trainer

    for gin in ("base.gin", "e13_dur_emotion.gin"):
        gin_config.parse([REPO / "gin" / gin], [f"Trainer.data = ['{store}']", *bindings])
        s = Trainer()
        aligned = s.model.text_path == "aligned"
        ds = LatentDataset.open([store], "train", min_frames=s.min_frames, require_units=aligned)
        stats = compute_latent_stats(ds)
        vocab = s.text.build_vocab(seg.text for seg in ds.segments)
        langs = sorted({seg.language for seg in ds.segments if seg.language})
        sampler = s.batch_sampler
        stream = BatchStream(sampler, s.pairing.budget_lengths(ds.segments), 0)
        builder = BatchBuilder(ds, s.pairing, stats, vocab, langs, s.model.text_path, CFGDrop(**s.cfg_drop),
                               row_frames=sampler.row_frames)
        rng = np.random.default_rng(0)

        def plan(builder=builder, stream=stream, rng=rng):
            return builder.plan(stream.next()[1], rng, train=True)

        def assemble(p, builder=builder):
            return builder.assemble(p)[0]

        def build(plan=plan, assemble=assemble):
            return assemble(plan())

        real = padded = packed = rows4k = 0
        for _ in range(len(stream.plan(0).batches)):
            cond = build().cond
            real += sum(cond.layout.lengths)
            padded += cond.frame_mask.numel()
            packed += cond.layout.num_frames
            rows4k += PackLayout.plan(cond.layout.lengths, 4096).num_frames
        print(f"{gin}: budget {sampler.frame_budget}, max items {sampler.max_items}; padded batch "
              f"{100 * (1 - real / padded):.1f} % padding; rows of 4096 frames {100 * (1 - real / rows4k):.2f} %")
        print(f"padding share: {100 * (1 - real / packed):.2f} %  "
              f"({gin}, row_frames={sampler.row_frames}; target < 2 %)")
        times, plan_times = [], []
        for _ in range(max(40, len(stream.plan(0).batches))):  # the build alone, on this thread
            started = time.perf_counter()
            p = plan()
            planned = time.perf_counter()
            assemble(p)
            times.append(time.perf_counter() - started)
            plan_times.append(planned - started)
        times.sort()
        print(f"batch build: median {1e3 * statistics.median(times):.2f} ms, 90th percentile "
              f"{1e3 * times[int(0.9 * (len(times) - 1))]:.2f} ms; its plan (the draws, in order) median "
              f"{1e3 * statistics.median(plan_times):.2f} ms  ({gin}, {len(times)} batches)")
        faults: list[int] = []  # minor page faults of each prefetched build (its own thread's)

        def counted(p, assemble=assemble, faults=faults):
            before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
            batch = assemble(p)
            faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
            return batch

        workers = s.build_workers()
        # (prefetch, build workers, Trainer.gc_every): the trainer's collection policy
        # (flowkit.train.collection) and, beside it, Python's automatic collection
        runs = [(False, 1, s.gc_every), (True, 1, None)] + ([(True, 1, s.gc_every)] if s.gc_every else [])
        runs += [(True, workers, s.gc_every)] if workers > 1 else []
        for enabled, n, gc_every in runs:
            prefetcher = StepPrefetcher(plan, lambda: None, enabled=enabled, depth=s.prefetch_steps,
                                        workers=n, assemble=counted if enabled else assemble)
            waits = []
            with GarbageCollection(gc_every) as collection:
                for step in range(steps):
                    collection.maybe_collect(step)  # in the training thread, as the loop does
                    started = time.perf_counter()
                    batch = prefetcher.get()
                    waits.append(time.perf_counter() - started)
                    time.sleep(0.010)  # the step itself, at GPU speed
                    del batch  # freed after the step, as the loop frees it
            prefetcher.close()
            stall = sum(waits[2:]) / (sum(waits[2:]) + 0.010 * (steps - 2))
            label = (f"prefetch on, {prefetcher.ahead} steps ahead, {n} build worker{'s' if n > 1 else ''}"
                     if enabled else "prefetch off")
            label += (", automatic garbage collection" if gc_every is None else
                      f", garbage collected every {gc_every} steps: {collection.collections} x "
                      f"{1e3 * collection.seconds / max(1, collection.collections):.2f} ms")
            print(f"data stall at a 10 ms step: {100 * stall:.1f} %  ({gin}, {label}; median wait "
                  f"{1e3 * statistics.median(waits[2:]):.2f} ms, longest {1e3 * max(waits[2:]):.2f} ms; target < 1 %)")
        print(f"page faults of the prefetched builds: {sum(faults)} in {len(faults)}; builds with more than "
              f"1000: {sum(f > 1000 for f in faults)}  ({gin}; see flowkit/batching/host_memory.py)")
        ds.close()


def short_run(store: Path, config: str, steps: int) -> None:
    """Time ``flowkit train CONFIG --data STORE --steps N`` in this process, stage by stage."""
    import contextlib
    import io

    from flowkit.train import evaluation, memory, run
    from flowkit.train import loop as loop_mod

    stages: dict[str, list[float]] = {}

    def timed(owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                stages.setdefault(label, []).append(time.perf_counter() - started)

        setattr(owner, name, wrapper)

    timed(memory, "step0_check", "step-0 memory check")
    timed(evaluation.Evaluator, "_prepare", "evaluation: fixed batches built")
    timed(evaluation.Evaluator, "_pass", "evaluation: passes")
    timed(loop_mod.TrainingLoop, "evaluate", "evaluation (all of it)")
    timed(loop_mod.TrainingLoop, "train_step", "training steps")
    timed(loop_mod.TrainingLoop, "save", "checkpoint saves")
    timed(loop_mod.TrainingLoop, "run", "the loop (all of it)")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            run.train([REPO / "gin" / config], [], data=[store], out=Path(tmp) / "run", steps=steps, device="cpu")
        total = time.perf_counter() - started
    print(f"short run: flowkit train gin/{config} --data STORE --steps {steps}: {total:.1f} s in all "
          f"(torch threads {torch.get_num_threads()})")
    for label, times in stages.items():
        print(f"  {label:34s} {len(times):3d} x  {sum(times):7.1f} s  ({', '.join(f'{t:.1f}' for t in times)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="steps of each loop (a fifth are warm-up; default 30)")
    parser.add_argument("--preset", default="small", help="model.dit.preset of both loops (default small)")
    parser.add_argument("--corpus", type=Path, help="a prepared store of the shared corpus (see the docstring)")
    parser.add_argument("--stall-steps", type=int, default=200,
                        help="simulated 10 ms steps of the data stall (--corpus)")
    parser.add_argument("-b", "--binding", action="append", default=[],
                        help='gin binding for the --corpus figures, e.g. -b "Trainer.prefetch_steps = 4"')
    parser.add_argument("--short-run", type=Path, metavar="STORE",
                        help="time a short `flowkit train` on STORE stage by stage, then stop")
    parser.add_argument("--short-config", default="e13_dur_emotion.gin", help="gin file of --short-run")
    parser.add_argument("--short-steps", type=int, default=2, help="steps of --short-run")
    parser.add_argument("--switch-interval", type=float, default=None, metavar="SECONDS",
                        help="the interpreter's GIL switch interval (sys.setswitchinterval; default 0.005)")
    args = parser.parse_args()
    for name, least in (("steps", 2), ("stall_steps", 3), ("short_steps", 1)):
        if getattr(args, name) < least:  # --steps: a fifth are warm-up; --stall-steps: the first two are
            parser.error(f"--{name.replace('_', '-')} must be at least {least}, got {getattr(args, name)}")
    if args.switch_interval is not None and args.switch_interval <= 0:
        parser.error(f"--switch-interval must be above 0 seconds, got {args.switch_interval:g}")
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    from flowkit.batching.host_memory import keep_freed_memory

    keep_freed_memory()  # as flowkit train does first thing (flowkit.train.run)
    if args.short_run is not None:
        short_run(args.short_run.resolve(), args.short_config, args.short_steps)
        return
    if args.corpus is not None:
        corpus_figures(args.corpus.resolve(), args.stall_steps, args.binding)

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
    print(f"model preset {args.preset}, batch {tuple(batch.x1.shape)}, {args.steps} steps, "
          f"torch threads {torch.get_num_threads()}")
    print(f"bare loop step   median {bare_med * 1e3:8.2f} ms")
    print(f"trainer step     median {trainer_med * 1e3:8.2f} ms")
    print(f"ratio trainer/bare: {trainer_med / bare_med:.3f}  (target <= 1.02)")
    print(f"data share of a CPU trainer step (batches built in the step): median "
          f"{statistics.median(stall[skip:]) * 100:.2f} %  (target < 5 %)")


if __name__ == "__main__":
    from flowkit.config import one_line
    from flowkit.errors import FlowkitError

    try:
        main()
    except FlowkitError as error:  # a bad store, config or checkpoint path: one line, as flowkit's commands say it
        print(f"{Path(__file__).name}: {one_line(error)}", file=sys.stderr)
        sys.exit(error.exit_code)
