"""Checkpoint averaging (`flowkit average`): the mean of the state dicts, the choice of the
last or best checkpoints, the provenance, the refusal of mixed configs, and that synthesis
loads the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_checkpoint import save_tiny_checkpoint
from typer.testing import CliRunner

from flowkit.checkpoints import files as ckpt
from flowkit.checkpoints.averaging import average_checkpoints, average_run, choose_checkpoints
from flowkit.cli.app import app
from flowkit.errors import CheckpointError

TEXTS = ["hello there", "a test"]


def _run_with_steps(root: Path, steps: list[int], losses: dict[int, float]) -> Path:
    """A run directory whose checkpoints hold the tiny model's weights shifted by the step
    (raw) and by twice the step (EMA), and a metrics.jsonl with those EMA validation losses."""
    base = save_tiny_checkpoint(root, TEXTS, step=steps[0])
    loaded = ckpt.load_checkpoint(base)
    for step in steps:
        gen = torch.Generator().manual_seed(step)
        model = {k: (v + torch.randn(v.shape, generator=gen) * step if v.is_floating_point() else v.clone())
                 for k, v in loaded.state["model"].items()}
        shadow = {k: v + 2.0 * step for k, v in model.items() if v.is_floating_point()}
        meta = {k: v for k, v in loaded.meta.items() if k not in ("format_version", "step")}
        ckpt.save_checkpoint(root / "checkpoints", step,
                             {"model": model, "ema": {"num_updates": step, "shadow": shadow}}, meta)
    (root / "config.gin").write_text("", encoding="utf-8")
    lines = [json.dumps({"kind": "eval", "step": s, "val_loss_ema": v}) for s, v in losses.items()]
    (root / "metrics.jsonl").write_text("\n".join([*lines, '{"torn'])  + "\n", encoding="utf-8")
    return root


def test_average_is_the_mean_of_the_state_dicts(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path / "run", [1, 2, 3, 4], {1: 0.5, 2: 0.3, 3: 0.9, 4: 0.4})
    done = average_run(run, last=3)
    assert [s for s, _ in done.chosen] == [2, 3, 4]
    assert done.path == run / "averaged" / "last3" / "step-00000004"
    avg = ckpt.load_checkpoint(done.path)
    parts = [ckpt.load_checkpoint(run / "checkpoints" / ckpt.checkpoint_name(s)) for s in (2, 3, 4)]
    for key, value in avg.state["model"].items():
        stacked = torch.stack([p.state["model"][key] for p in parts])
        if value.is_floating_point():
            # float32 mean of three values: within a few ulps of the float64 sum cast back
            torch.testing.assert_close(value, stacked.mean(0), rtol=1e-6, atol=1e-6)
        else:
            assert torch.equal(value, stacked[-1])
    for key, value in avg.state["ema"]["shadow"].items():
        stacked = torch.stack([p.state["ema"]["shadow"][key] for p in parts])
        torch.testing.assert_close(value, stacked.mean(0), rtol=1e-6, atol=1e-6)
    # not a copy of one of them
    key = next(k for k, v in avg.state["model"].items() if v.is_floating_point())
    assert not torch.equal(avg.state["model"][key], parts[-1].state["model"][key])
    record = avg.meta["averaged"]
    assert record["how"] == "last 3"
    assert [c["step"] for c in record["checkpoints"]] == [2, 3, 4]
    assert [c["val_loss_ema"] for c in record["checkpoints"]] == [0.3, 0.9, 0.4]
    assert all(len(c["state_sha256"]) == 64 for c in record["checkpoints"])
    assert avg.step == 4 and avg.meta["model_config"] == parts[0].meta["model_config"]


def test_best_k_by_ema_validation_loss(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path / "run", [1, 2, 3, 4], {1: 0.5, 2: 0.3, 3: 0.9, 4: 0.4})
    chosen, how = choose_checkpoints(run, best=2)
    assert [s for s, _ in chosen] == [2, 4] and how.startswith("best 2")
    with pytest.raises(CheckpointError, match=r"4 checkpoint\(s\) with an EMA validation loss .* --best 5"):
        choose_checkpoints(run, best=5)
    with pytest.raises(CheckpointError, match=r"holds 4 valid checkpoint\(s\), --last 6"):
        choose_checkpoints(run, last=6)


def test_mixed_configs_are_refused_in_one_line(tmp_path: Path) -> None:
    a = save_tiny_checkpoint(tmp_path / "a", TEXTS, step=1)
    b = save_tiny_checkpoint(tmp_path / "b", TEXTS, step=2, text_path="unaligned")
    with pytest.raises(CheckpointError, match=r"come from different configs \(model_config.text_path") as info:
        average_checkpoints([a, b], tmp_path / "out")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()
    c = save_tiny_checkpoint(tmp_path / "c", ["other words entirely"], step=3)
    with pytest.raises(CheckpointError, match=r"different configs \(vocab\)"):
        average_checkpoints([a, c], tmp_path / "out")


def test_cli_and_synthesis_load_the_average(tmp_path: Path) -> None:
    from flowkit.evaluation.folder import default_out
    from flowkit.synth.inference import load_inference_model

    run = _run_with_steps(tmp_path / "run", [1, 2], {1: 0.5, 2: 0.3})
    result = CliRunner().invoke(app, ["average", str(run), "--last", "2"])
    assert result.exit_code == 0, result.output
    assert "averaged 2 checkpoint(s) (last 2: steps 1, 2)" in result.output
    path = run / "averaged" / "last2" / "step-00000002"
    im = load_inference_model(path)
    assert im.step == 2 and im.checkpoint == path
    assert default_out(path, "tests.jsonl", 2) == run.resolve() / "evals" / "tests-last2-step2"
    mixed = save_tiny_checkpoint(tmp_path / "x", TEXTS, step=5, text_path="unaligned")
    result = CliRunner().invoke(app, ["average", str(path), str(mixed), "--out", str(tmp_path / "o")])
    assert result.exit_code == 4 and "different configs" in result.output


def test_init_from_an_average(tiny_store: Path, tmp_path: Path) -> None:
    from train_helpers import DEBUG_GIN, TINY, train

    from flowkit.train import run

    parent = tmp_path / "parent"
    assert train(tiny_store, parent, "Trainer.save_every = 2", steps=4).status == "completed"
    done = average_run(parent, last=2)
    child = tmp_path / "child"
    outcome = run.train([DEBUG_GIN], list(TINY), data=[tiny_store], out=child, steps=1, device="cpu",
                        init_from=done.path)
    assert outcome.status == "completed"
    info = json.loads((child / "run_info.json").read_text())
    assert info["init_from"]["checkpoint"] == str(done.path.resolve())


def test_run_directories_given_as_checkpoints_get_the_fix(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path / "run", [1, 2], {1: 0.5, 2: 0.3})
    result = CliRunner().invoke(app, ["average", str(run), str(run), "--out", str(tmp_path / "o")])
    assert result.exit_code == CheckpointError.exit_code, result.output
    assert "is a run directory, not a checkpoint" in result.output and "--last K" in result.output
    assert "COMPLETE" not in result.output and not (tmp_path / "o").exists()
