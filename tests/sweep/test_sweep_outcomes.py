"""A sweep states its outcome truthfully: a point is done only when its run completed with
the checkpoint of its last step, a failed point is counted as failed (exit 5) and retried
by the same command, a second sweep process in one folder is refused naming the first's
pid, and a --grid over a binding the experiment never reads is refused.

The points run a stand-in trainer (a small script writing a run directory the way
`flowkit train` does) so a failure can be staged without training: ``full`` logs the last
step and exits 5 without its last checkpoint (a full disk), ``ok`` completes.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from flowkit.errors import ConfigError, DataError, TrainingError
from flowkit.sweep import run as sweep_run
from flowkit.sweep.grid import parse_axis
from flowkit.sweep.state import SweepSpec, point_run_state

REPO = Path(__file__).resolve().parents[2]
DEBUG_GIN = str(REPO / "gin" / "debug.gin")

TRAINER = textwrap.dedent("""
    import json, pathlib, sys
    out = pathlib.Path(sys.argv[1]); mode = pathlib.Path(sys.argv[2]).read_text().strip()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.gin").write_text("Trainer.steps = 2\\n")
    with open(out / "metrics.jsonl", "a") as f:
        for step in (1, 2):
            f.write(json.dumps({"kind": "train", "step": step, "loss": 1.0 / step}) + "\\n")
        f.write(json.dumps({"kind": "eval", "step": 2, "val_loss_ema": 0.5}) + "\\n")
    first = out / "checkpoints" / "step-1"; first.mkdir(parents=True, exist_ok=True); \
(first / "COMPLETE").write_text("")
    if mode == "full":
        print("error: no space left on device"); sys.exit(5)
    last = out / "checkpoints" / "step-2"; last.mkdir(parents=True, exist_ok=True); (last / "COMPLETE").write_text("")
""")


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Points run the stand-in trainer; returns the file holding its mode ("full" or "ok")."""
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    mode = tmp_path / "mode"
    mode.write_text("full")

    def command(configs, bindings, data, out, device="auto"):
        return [sys.executable, str(script), str(out), str(mode)]

    monkeypatch.setattr(sweep_run, "train_command", command)
    return mode


def _spec(*grid: str) -> SweepSpec:
    return SweepSpec(configs=(DEBUG_GIN,), bindings=(), data=(), grid=tuple(parse_axis(g) for g in grid))


def test_a_point_that_logged_its_last_step_without_its_checkpoint_is_not_done(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints" / "step-1").mkdir(parents=True)
    (run / "checkpoints" / "step-1" / "COMPLETE").write_text("")
    (run / "config.gin").write_text("Trainer.steps = 2\n")
    (run / "metrics.jsonl").write_text(json.dumps({"kind": "train", "step": 2, "loss": 1.0}) + "\n")
    assert point_run_state(run) == "started"
    (run / "checkpoints" / "step-2").mkdir()
    (run / "checkpoints" / "step-2" / "COMPLETE").write_text("")
    assert point_run_state(run) == "done"


def test_failed_points_are_counted_failed_exit_5_and_retried_by_the_same_command(
        stand_in: Path, tmp_path: Path) -> None:
    root = tmp_path / "sw"
    lines: list[str] = []
    spec = _spec("Trainer.lr=[1e-3, 2e-3]")
    with pytest.raises(TrainingError, match="2 of 2 sweep points failed") as info:
        sweep_run.run_sweep(spec, root, say=lines.append)
    assert info.value.exit_code == 5
    summary = next((ln for ln in lines if ln.startswith(f"sweep {root}: ") and " points, " not in ln), lines)
    assert summary == f"sweep {root}: 2 failed", lines
    assert not any(line.startswith("best by") for line in lines), lines
    doc = json.loads((root / "sweep.json").read_text())
    assert {p["state"] for p in doc["points"]} == {"failed"}
    # the disk is freed: the same call retries both points, which now complete
    stand_in.write_text("ok")
    lines.clear()
    outcome = sweep_run.run_sweep(spec, root, say=lines.append)
    assert [p.state for p in outcome.points] == ["done", "done"]
    assert any("0 done, 0 running elsewhere (or queued), 2 to run" in line for line in lines), lines
    assert [p["attempts"] for p in json.loads((root / "sweep.json").read_text())["points"]] == [2, 2]


def test_a_second_sweep_in_one_folder_is_refused_naming_the_first(stand_in: Path, tmp_path: Path) -> None:
    import subprocess

    root = tmp_path / "sw"
    root.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from flowkit.data.locks import StoreLock; "
         "StoreLock.acquire(Path(sys.argv[1]) / 'sweep', 'x', 'y', command='sweep'); print('held', flush=True); "
         "time.sleep(60)", str(root)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DataError,
                           match=rf"sweep {root} is being written by pid {holder.pid}.*sweep.lock.*another --out"):
            sweep_run.run_sweep(_spec("Trainer.lr=[1e-3, 2e-3]"), root, say=lambda _: None)
        assert not (root / "logs").exists()  # nothing launched
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("grid, what", [
    ("t_sampler.logit_normal.mean=[0.0, 0.5]", "no component the experiment builds reads it"),
    ("UNUSED_MACRO=[1, 2]", "no binding references the macro"),
])
def test_a_grid_over_a_binding_the_experiment_never_reads_is_refused(grid: str, what: str, tmp_path: Path) -> None:
    root = tmp_path / "sw"
    key = grid.split("=")[0]
    with pytest.raises(ConfigError, match=rf"--grid {key}: the experiment never uses it \({what}\)"):
        sweep_run.run_sweep(_spec(grid), root, say=lambda _: None)
    assert not root.exists()


def test_a_sweep_into_a_read_only_folder_is_one_write_error(tmp_path: Path) -> None:
    from flowkit.errors import WriteError

    if os.geteuid() == 0:
        pytest.skip("root writes into a folder without write permission; test_writers.py covers read-only mounts")
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        with pytest.raises(WriteError, match="permission denied"):
            sweep_run.run_sweep(_spec("Trainer.lr=[1e-3, 2e-3]"), parent / "sw", say=lambda _: None)
    finally:
        parent.chmod(0o755)


def test_sweep_steps_binds_trainer_steps_for_every_point(stand_in: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`flowkit sweep --steps N`, as train's --steps: Trainer.steps = N after the -b bindings."""
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    stand_in.write_text("ok")
    launched: list[list[str]] = []
    stand_in_command = sweep_run.train_command

    def command(configs, bindings, data, out, device="auto"):
        launched.append(list(bindings))
        return stand_in_command(configs, bindings, data, out, device)

    monkeypatch.setattr(sweep_run, "train_command", command)
    result = CliRunner().invoke(app, ["sweep", DEBUG_GIN, "--grid", "Trainer.lr=[1e-3, 2e-3]", "-b",
                                      "Trainer.eval_every = 2", "--steps", "2", "--out", str(tmp_path / "sw")])
    assert result.exit_code == 0, result.output
    assert launched == [["Trainer.eval_every = 2", "Trainer.steps = 2", "Trainer.lr = 1e-3"],
                        ["Trainer.eval_every = 2", "Trainer.steps = 2", "Trainer.lr = 2e-3"]]


def test_a_probe_objective_without_a_probe_is_refused_before_any_run(tmp_path: Path) -> None:
    spec = SweepSpec(configs=(DEBUG_GIN,), bindings=(), data=(), grid=(parse_axis("Trainer.lr=[1e-3, 2e-3]"),),
                     objective="probe_wer")
    with pytest.raises(ConfigError, match=r"--objective probe_wer .* has none at Trainer.lr = 1e-3: bind -b "
                                          r"'Trainer.probe = @Probe\(\)'"):
        sweep_run.run_sweep(spec, tmp_path / "sw", say=lambda _: None)
    assert not (tmp_path / "sw").exists()


def test_a_damaged_sweep_json_says_how_to_rebuild_it_from_the_runs(stand_in: Path, tmp_path: Path) -> None:
    root = tmp_path / "sw"
    spec = _spec("Trainer.lr=[1e-3, 2e-3]")
    stand_in.write_text("ok")
    sweep_run.run_sweep(spec, root, say=lambda _: None)
    (root / "sweep.json").write_text('{"version": 1, "points": [')  # truncated
    with pytest.raises(DataError,
                       match="sweep.json: cannot be read as JSON .* delete it and run the same command again"):
        sweep_run.run_sweep(spec, root, say=lambda _: None)
    (root / "sweep.json").unlink()
    lines: list[str] = []
    outcome = sweep_run.run_sweep(spec, root, say=lines.append)
    assert [p.state for p in outcome.points] == ["done", "done"]
    assert any("2 points, 2 done, 0 running elsewhere (or queued), 0 to run" in line for line in lines), lines
    (root / "stranger.txt").write_text("not a sweep's\n")
    (root / "sweep.json").unlink()
    with pytest.raises(ConfigError, match="holds no sweep"):
        sweep_run.run_sweep(spec, root, say=lambda _: None)
