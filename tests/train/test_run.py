"""Runs in-process on the tiny store: resume equals an uninterrupted run, every refusal,
init-from, and the cleanup of replayed and torn metrics lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from state_compare import assert_same_tensors, final_state, records
from train_helpers import train, train_stopped_at

from flowkit.checkpoints import files as checkpoint
from flowkit.errors import CheckpointError, ResumeError, TrainingError
from flowkit.train import run

E11 = Path(__file__).resolve().parents[2] / "gin" / "e11_aligned.gin"
E13 = Path(__file__).resolve().parents[2] / "gin" / "e13_dur_emotion.gin"


@pytest.fixture(scope="module")
def reference(tiny_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted 8-step run."""
    out = tmp_path_factory.mktemp("ref") / "run"
    assert train(tiny_store, out, steps=8).status == "completed"
    return out


def test_run_directory_has_every_file(reference: Path) -> None:
    for name in ("config.gin", "run_info.json", "metrics.jsonl", "heartbeat.json", "latent_stats.json",
                 "data_rejections.jsonl", "report.md"):
        assert (reference / name).is_file(), name
    assert (reference / "config_sources" / "debug.gin").is_file()
    assert (reference / "config_sources" / "base.gin").is_file()
    assert not (reference / "run.lock").exists()
    assert ([p.name for _, p in checkpoint.list_checkpoints(reference / "checkpoints")]
            == ["step-00000004", "step-00000008"])
    assert checkpoint.list_checkpoints(reference / "best")
    kinds = [r["kind"] for r in records(reference)]
    assert kinds[0] == "eval" and kinds.count("train") == 8


def test_resume_continues_bit_identically(reference: Path, tiny_store: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    train_stopped_at(monkeypatch, tiny_store, out, 3)
    assert checkpoint.list_checkpoints(out / "checkpoints")[-1][0] == 3
    outcome = run.resume(out, device="cpu")
    assert outcome.status == "completed" and outcome.step == 8
    assert_same_tensors(final_state(reference), final_state(out))
    assert records(reference) == records(out)
    assert (out / "resume_info-00000003.json").is_file()


def test_replayed_and_torn_lines_are_removed(reference: Path, tiny_store: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    train_stopped_at(monkeypatch, tiny_store, out, 4)
    with (out / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"kind": "train", "step": 5, "loss": 123.0}) + "\n")  # replayed later
        f.write('{"kind": "train", "step": 6, "lo')  # torn by a kill
    run.resume(out, device="cpu")
    assert records(reference) == records(out)
    info = json.loads((out / "resume_info-00000004.json").read_text())
    assert info["metrics_lines_removed"] == 2


def test_train_into_a_run_of_another_config_is_refused(reference: Path, tiny_store: Path) -> None:
    """The same command continues a run (tests/reliability/test_requeue.py); another config is refused."""
    with pytest.raises(ResumeError, match=r"Trainer\.lr: 0\.001 -> 0\.5"):
        train(tiny_store, reference, "Trainer.lr = 0.5", steps=8)


def test_resume_refuses_a_changed_config(reference: Path) -> None:
    with pytest.raises(ResumeError, match=r"Trainer\.lr: 0\.001 -> 0\.5"):
        run.resume(reference, bindings=["Trainer.lr = 0.5"], device="cpu")


def test_resume_allows_logging_changes_and_more_steps(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    outcome = run.resume(out, steps=9, bindings=["Trainer.log_every = 3"], device="cpu")
    assert outcome.step == 9
    info = json.loads((out / "resume_info-00000008.json").read_text())
    assert set(info["allowed_config_changes"]) == {"Trainer.log_every", "Trainer.steps"}


def test_resume_refuses_a_checkpoint_past_the_steps(reference: Path) -> None:
    with pytest.raises(ResumeError, match="at step 8, past Trainer.steps = 6; resume with --steps 8"):
        run.resume(reference, steps=6, device="cpu")


def test_resume_refuses_changed_data(tiny_store: Path, other_store: Path, tmp_path: Path) -> None:
    store = tmp_path / "data.zarr"
    shutil.copytree(tiny_store, store)
    out = tmp_path / "run"
    train(store, out, steps=4)
    shutil.rmtree(store)
    shutil.copytree(other_store, store)
    with pytest.raises(ResumeError, match="training data .* changed"):
        run.resume(out, steps=8, device="cpu")


def test_resume_falls_back_to_the_previous_valid_checkpoint(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    newest = out / "checkpoints" / "step-00000008" / "state.pt"
    newest.write_bytes(newest.read_bytes()[:1000])
    outcome = run.resume(out, device="cpu")
    assert outcome.step == 8
    info = json.loads((out / "resume_info-00000004.json").read_text())
    assert "truncated" in info["skipped_checkpoints"][0][1]
    assert_same_tensors(final_state(reference)["model"], final_state(out)["model"])


def test_busy_run_directory_is_refused(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    (out / "run.lock").write_text(json.dumps({"pid": 1, "host": __import__("socket").gethostname()}))
    with pytest.raises(TrainingError, match="in use by pid 1"):
        run.resume(out, steps=9, device="cpu")


def test_init_from_accepts_dur_cond_none_to_emotion(tiny_store: Path, tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    train(tiny_store, parent, "model.dit.preset = 'tiny'", steps=2, config=E11)
    child = tmp_path / "child"
    outcome = run.train([E13], ["model.dit.preset = 'tiny'", "batch_sampler.frame_budget.frame_budget = 700",
                                "batch_sampler.frame_budget.max_items = 4", "Trainer.loggers = []",
                                "Trainer.eval_every = 2", "Trainer.eval_batches = 1"],
                        data=[tiny_store], out=child, steps=0 + 1, device="cpu", init_from=parent)
    assert outcome.status == "completed"
    info = json.loads((child / "run_info.json").read_text())
    assert info["init_from"]["model_diff"] == {"dur_cond": ["none", "emotion"]}
    evals = [r for r in records(child) if r["kind"] == "eval"]
    assert any(k.startswith("val_tempo_") for k in evals[0])
    assert "val_loss_ema_even" in evals[0] and "val_loss_ema_cross" in evals[0]


def test_init_from_refuses_another_model(tiny_store: Path, reference: Path, tmp_path: Path) -> None:
    # the network's shape comes from the parent; the text path is the config's choice
    with pytest.raises(ResumeError, match="text_path: 'unaligned' -> 'aligned'"):
        run.train([Path(__file__).resolve().parents[2] / "gin" / "debug.gin"],
                  ["model.dit.depth = 3", "model.dit.text_path = 'aligned'", "Trainer.loggers = []"],
                  data=[tiny_store], out=tmp_path / "c", steps=1, device="cpu", init_from=reference)


def test_init_from_a_missing_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        run.train(["debug.gin"], out=tmp_path / "c", init_from=tmp_path / "nope")


def test_nonfinite_loss_stops_with_the_step(tiny_store: Path, tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match=r"non-finite .* at step \d+ .*Trainer.nonfinite = 'skip'"):
        train(tiny_store, tmp_path / "run", "Trainer.lr = 1e30", "lr_schedule.warmup_cosine.warmup_updates = 0",
              "Trainer.grad_clip = None", steps=8)


def test_nonfinite_skip_policy_stops_after_k_in_a_row(tiny_store: Path, tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match=r"3 steps in a row non-finite"):
        train(tiny_store, tmp_path / "run", "Trainer.lr = 1e30", "lr_schedule.warmup_cosine.warmup_updates = 0",
              "Trainer.grad_clip = None", "Trainer.nonfinite = 'skip'", steps=8)
    skips = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # the third non-finite step in a row stops the run: it is neither applied nor skipped
    assert sum(r.get("event") == "skipped_nonfinite" for r in skips) == 2


def test_overfit_one_batch_reuses_the_batch(tiny_store: Path, tmp_path: Path) -> None:
    outcome = train(tiny_store, tmp_path / "run", "Trainer.overfit_one_batch = True", steps=3)
    assert outcome.status == "completed"
    frames = {r["frames"] for r in records(tmp_path / "run") if r["kind"] == "train"}
    assert len(frames) == 1


def test_export_safetensors_labels_the_weights(reference: Path, tmp_path: Path) -> None:
    from safetensors import safe_open

    path, _ = checkpoint.find_latest(reference / "checkpoints")
    out = checkpoint.export_safetensors(path, tmp_path / "ema.safetensors", which="ema")
    with safe_open(str(out), "pt") as f:
        assert f.metadata()["weights"] == "ema"
        state = checkpoint.load_checkpoint(path).state
        name = next(iter(state["ema"]["shadow"]))
        assert torch.equal(f.get_tensor(name), state["ema"]["shadow"][name])
