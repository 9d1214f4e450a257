"""Two training processes on the gloo backend, launched by torchrun as a user would.

One 4-step 2-rank run (module fixture) is checked for: completion, rank 0 alone writing
the run directory, its first optimizer step equal to one process stepping on the union of
both ranks' batches, and the per-rank state in its checkpoints. A second run, started by
``flowkit train --nproc 2`` for 2 steps and resumed to 4, must equal it bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from distributed_helpers import (
    BINDINGS,
    DEBUG_GIN,
    binding_args,
    check,
    launch,
    state_at,
    torchrun_train,
    writes_of,
)
from state_compare import assert_same_tensors, records

from flowkit.errors import ResumeError
from flowkit.train import run


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist") / "run"
    check(torchrun_train(out, 4))
    return out


def test_two_ranks_complete(two_ranks: Path) -> None:
    train = [r for r in records(two_ranks) if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    assert [r["step"] for r in records(two_ranks) if r["kind"] == "eval"] == [0, 2, 4]
    info = json.loads((two_ranks / "run_info.json").read_text())
    assert info["world_size"] == 2
    state = state_at(two_ranks, 4)
    assert state["world_size"] == 2 and len(state["ranks"]) == 2
    # Each rank has its own streams and its own place in the epoch's batches.
    ranks = state["ranks"]
    assert [r["rng"]["rank"] for r in ranks] == [0, 1]
    assert not torch.equal(ranks[0]["rng"]["flow"], ranks[1]["rng"]["flow"])
    assert ranks[0]["rng"]["data"] != ranks[1]["rng"]["data"]
    assert ranks[0]["sampler"] == ranks[1]["sampler"]  # the same number of batches dealt


def test_only_rank_0_writes_the_run_directory(two_ranks: Path) -> None:
    assert writes_of(two_ranks, 1) == []
    rank0 = writes_of(two_ranks, 0)
    assert any("metrics.jsonl" in w for w in rank0) and any("state.pt" in w for w in rank0)
    top = {p.name for p in two_ranks.iterdir()}
    assert top == {"best", "checkpoints", "config.gin", "config_sources", "data_rejections.jsonl", "heartbeat.json",
                   "latent_stats.json", "metrics.jsonl", "report.md", "run_info.json"}
    steps = [r["step"] for r in records(two_ranks) if r["kind"] == "train"]
    assert len(steps) == len(set(steps))  # one line per step, not one per rank


def test_first_step_equals_one_process_on_the_union_of_both_batches(two_ranks: Path) -> None:
    from flowkit import config as gin_config
    from flowkit.batching.builder import BatchBuilder
    from flowkit.batching.collate import CFGDrop
    from flowkit.batching.samplers import BatchStream
    from flowkit.data.dataset import LatentDataset
    from flowkit.data.demo import demo_store_path
    from flowkit.data.stats import compute_latent_stats
    from flowkit.train.objective import draw_flow, loss_names, loss_terms, unit_sums, unit_weighted
    from flowkit.train.optimization import build_optimizer, set_learning_rate
    from flowkit.train.randomness import RandomStreams, seed_globals
    from flowkit.train.settings import Trainer

    gin_config.parse([DEBUG_GIN], [*BINDINGS, "Trainer.steps = 4"])
    s = Trainer()
    data = LatentDataset.open([demo_store_path()], "train", min_frames=s.min_frames)
    try:
        stats = compute_latent_stats(data)
        vocab = s.text.build_vocab(seg.text for seg in data.segments)
        languages = sorted({seg.language for seg in data.segments if seg.language})
        seed_globals(s.seed)
        model = s.model.build(data.latent_dim, vocab.size, len(languages))
        initial = {k: v.clone() for k, v in model.state_dict().items()}
        optimizer = build_optimizer(model, lr=s.lr, betas=s.betas, weight_decay=s.weight_decay,
                                    device=torch.device("cpu"))
        builder = BatchBuilder(data, s.pairing, stats, vocab, languages, s.model.text_path, CFGDrop(**s.cfg_drop))
        lengths = s.pairing.budget_lengths(data.segments)
        micro = []
        for rank in (0, 1):  # what each rank draws at its first step, here in one process
            _, indices = BatchStream(s.batch_sampler, lengths, s.seed, rank, 2).next()
            streams = RandomStreams.create(s.seed, rank)
            batch, _ = builder.build(indices, streams.data, train=True)
            t, x0 = draw_flow(batch.x1.shape, s.t_sampler, streams.flow)
            micro.append((batch.x1, batch.cond, t, x0))
        names = loss_names(s.losses)
        set_learning_rate(optimizer, s.lr * float(s.lr_schedule(0, s.steps)))
        optimizer.zero_grad(set_to_none=True)
        totals = unit_sums(cond for _, cond, _, _ in micro)
        loss = torch.zeros(())
        for x1, cond, t, x0 in micro:  # the two ranks' micro-batches, weighted as one batch
            named, _ = loss_terms(model, s.schedule, s.losses, names, x1, cond, t, x0, autocast=False)
            shares = unit_weighted(named, totals)
            objective = sum(term.weight * shares[term.name] for term in named)
            objective.backward()
            loss = loss + objective.detach()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], s.grad_clip)
        optimizer.step()
    finally:
        data.close()

    logged = next(r for r in records(two_ranks) if r["kind"] == "train" and r["step"] == 1)
    assert logged["loss"] == pytest.approx(float(loss), rel=1e-5)
    assert logged["items"] == sum(x1.shape[0] for x1, *_ in micro)
    after_one = state_at(two_ranks, 1)["model"]
    for name, value in model.state_dict().items():
        torch.testing.assert_close(after_one[name], value, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
    # The step did move the weights (the comparison is not between two initialisations).
    assert any(not torch.allclose(initial[k], v) for k, v in after_one.items())


def test_stop_and_resume_with_two_ranks_is_bit_identical(two_ranks: Path, tmp_path: Path) -> None:
    out = tmp_path / "resumed"
    check(launch(["-m", "flowkit", "train", str(DEBUG_GIN), "--out", str(out), "--device", "cpu", "--nproc", "2",
                  *binding_args("Trainer.steps = 2")]))
    assert [r["step"] for r in records(out) if r["kind"] == "train"] == [1, 2]
    check(launch(["-m", "flowkit", "resume", str(out), "--steps", "4", "--device", "cpu", "--nproc", "2"]))
    resumed, uninterrupted = state_at(out, 4), state_at(two_ranks, 4)
    # The lr horizon is fixed at the start (2 vs 4 steps); the constant lr makes it moot.
    assert (resumed["counters"].pop("horizon"), uninterrupted["counters"].pop("horizon")) == (2, 4)
    assert_same_tensors(resumed, uninterrupted)
    assert records(out) == records(two_ranks)
    assert (out / "resume_info-00000002.json").is_file()


def test_resume_with_another_world_size_is_refused(two_ranks: Path) -> None:
    with pytest.raises(ResumeError, match="written by 2 training process.*same number.*--nproc 2"):
        # More steps than the run's 4: a finished run is left untouched before any check.
        run.resume(two_ranks, steps=8, device="cpu")
