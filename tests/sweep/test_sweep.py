"""flowkit sweep: points, names, refusals, and real sweeps of gin/debug.gin end to end.

The end-to-end tests share one uninterrupted 2x2 sweep (`reference`, 2 points at once)
and compare every other sweep's points with it: a sweep killed with SIGKILL mid-way and
run again, the submitit LocalExecutor launcher, and an Optuna study killed and resumed.
Equal means bit-equal: every tensor of the newest checkpoint (torch.equal) and every
metrics line without its timing fields, as the resume tests of `flowkit train` demand.
All runs use one thread (tests/conftest.py sets OMP_NUM_THREADS=1, which the local
launcher keeps), so the comparison holds on any x86 CPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flowkit.errors import ConfigError
from flowkit.sweep.grid import Axis, Point, grid_points, parse_axis, random_points, with_seeds
from flowkit.sweep.naming import MAX_NAME, point_names, readable_value

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from state_compare import assert_same_tensors, final_state, records  # noqa: E402

LR = "Trainer.lr=[1e-3, 2e-3]"
SCHEDULE = "Trainer.schedule=[@schedule.flow_matching(), @schedule.cosine_vpred()]"
# 4 steps, a checkpoint every 2 (so a kill can land between two), evaluations at 0 and 4
BASE = ["Trainer.steps = 4", "Trainer.save_every = 2", "Trainer.eval_every = 4", "Trainer.loggers = []"]
NAMES = ["lr=1e-3,schedule=flow_matching", "lr=1e-3,schedule=cosine_vpred",
         "lr=2e-3,schedule=flow_matching", "lr=2e-3,schedule=cosine_vpred"]


def sweep_command(out: Path, *extra: str, grid: tuple[str, ...] = (LR, SCHEDULE)) -> list[str]:
    cmd = [sys.executable, "-m", "flowkit", "sweep", str(REPO / "gin" / "debug.gin"), "--out", str(out),
           "--device", "cpu"]
    for g in grid:
        cmd += ["--grid", g]
    for b in BASE:
        cmd += ["-b", b]
    return [*cmd, *extra]


def run_ok(cmd: list[str], timeout: float = 400) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def assert_same_run(a: Path, b: Path) -> None:
    assert records(a) == records(b), f"{a} and {b} logged different metrics"
    assert_same_tensors(final_state(a), final_state(b), str(a))


def kill_when(proc: subprocess.Popen[str], ready, timeout: float = 300) -> None:
    """SIGKILL the sweep's whole process group (the sweep and its training) once ``ready()``."""
    t0 = time.monotonic()
    while not ready():
        assert proc.poll() is None, f"the sweep ended before the kill: {proc.communicate()}"
        assert time.monotonic() - t0 < timeout, "timed out waiting for the moment to kill"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def _point_state(root: Path, name: str) -> str | None:
    try:
        doc = json.loads((root / "sweep.json").read_text())
    except (OSError, ValueError):
        return None
    return next((p["state"] for p in doc["points"] if p["name"] == name), None)


# ---- points and names (no training) ------------------------------------------------


def test_grid_values_are_gin_text_split_at_top_level_commas() -> None:
    axis = parse_axis("Trainer.schedule=[@schedule.flow_matching(), @schedule.cosine_vpred()]")
    assert axis == Axis("Trainer.schedule", ("@schedule.flow_matching()", "@schedule.cosine_vpred()"))
    nested = parse_axis("model.dit.x = [(1, 2), 'a,b', [3, 4], %LR,]")
    assert nested.values == ("(1, 2)", "'a,b'", "[3, 4]", "%LR")
    for bad, why in (("Trainer.lr", "KEY=\\[VALUES\\]"), ("Trainer.lr=1e-3", "bracketed list"),
                     ("Trainer.lr=[]", "empty"), ("Trainer.lr=[1, , 2]", "two commas"),
                     ("Trainer.lr=[1, 1]", "twice"), ("9x.lr=[1]", "not a gin binding key"),
                     ("Trainer.lr=[1, 2] 3", "bracketed list")):
        with pytest.raises(ConfigError, match=why):
            parse_axis(bad)


def test_points_product_random_draws_and_seeds() -> None:
    axes = [parse_axis(LR), parse_axis(SCHEDULE)]
    points = grid_points(axes)
    assert [p.lines for p in points][1] == ["Trainer.lr = 1e-3", "Trainer.schedule = @schedule.cosine_vpred()"]
    assert len(points) == 4
    drawn = random_points(axes, 3, seed=5)
    assert drawn == random_points(axes, 3, seed=5) and len(set(drawn)) == 3 and set(drawn) <= set(points)
    with pytest.raises(ConfigError, match="more points than the grid has"):
        random_points(axes, 5, seed=0)
    seeded = with_seeds(points[:1], 2)
    assert [p.lines[-1] for p in seeded] == ["Trainer.seed = 0", "Trainer.seed = 1"]
    with pytest.raises(ConfigError, match="--seeds 2 with --grid Trainer.seed"):
        with_seeds(grid_points([Axis("Trainer.seed", ("1", "2"))]), 2)
    with pytest.raises(ConfigError, match="given twice"):
        grid_points([axes[0], axes[0]])


def test_point_names_are_readable_stable_and_collision_free() -> None:
    points = grid_points([parse_axis(LR), parse_axis(SCHEDULE)])
    assert point_names(points) == NAMES
    assert point_names(list(reversed(points))) == list(reversed(NAMES))  # a name depends on its point only
    assert readable_value("'a b/c'") == "a_b_c" and readable_value("@t_sampler.logit_normal()") == "logit_normal"
    # keys that share their last part keep a qualifier; values that sanitise alike get a hash
    clash = grid_points([Axis("Trainer.lr", ("1",)), Axis("Probe.lr", ("'a b'", "'a/b'", "'A b'"))])
    names = point_names(clash)
    assert all(n.lower().startswith("trainer.lr=1,probe.lr=a_b~") for n in names), names
    assert len({n.lower() for n in names}) == 3
    long = [Point((("Trainer.lr", "1"), ("model.dit.preset", "'" + "x" * 200 + "'")))]
    (name,) = point_names(long)
    assert len(name) <= MAX_NAME and "~" in name and all(c.isalnum() or c in "._+-=,~" for c in name)


# ---- refusals before any run starts --------------------------------------------------


@pytest.mark.parametrize("grid, message", [
    ("Trainer.lrr=[1e-3, 2e-3]", r"--grid Trainer\.lrr: value 1e-3: .*no parameter 'lrr'.*did you mean 'lr'"),
    ("Trainer.lr=['fast', 1e-3]", r"--grid Trainer\.lr: value 'fast': .*expected float"),
    ("Trainer.schedule=[@schedule.flow_matching(), @schedule.cosin_vpred()]",
     r"--grid Trainer\.schedule: value @schedule\.cosin_vpred\(\): unknown component "
     r".*did you mean 'schedule\.cosine_vpred'"),
])
def test_bad_bindings_are_refused_before_any_run(tmp_path: Path, grid: str, message: str) -> None:
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    out = tmp_path / "sw"
    result = CliRunner().invoke(app, ["sweep", str(REPO / "gin" / "debug.gin"), "--grid", grid, "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    import re

    assert re.search(message, lines[0]), lines[0]
    assert not out.exists()  # nothing started, nothing written


# ---- real sweeps ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted 2x2 sweep, two points at once."""
    out = tmp_path_factory.mktemp("sweeps") / "reference"
    proc = run_ok(sweep_command(out, "--parallel", "2"))
    assert "2 points at once, 1 thread(s) each" in proc.stdout
    assert "best by val_loss_ema: " in proc.stdout
    return out


def test_sweep_writes_one_run_per_point_and_sweep_json(reference: Path) -> None:
    doc = json.loads((reference / "sweep.json").read_text())
    assert [p["name"] for p in doc["points"]] == NAMES
    assert {p["state"] for p in doc["points"]} == {"done"}
    assert doc["points"][1]["bindings"] == ["Trainer.lr = 1e-3", "Trainer.schedule = @schedule.cosine_vpred()"]
    for name in NAMES:
        config = (reference / name / "config.gin").read_text()
        assert ("cosine_vpred" in config) == ("cosine_vpred" in name)
        assert (reference / "logs" / f"{name}.log").is_file()
    # the same command again: every point is skipped (nothing is launched)
    again = run_ok(sweep_command(reference))
    assert ("4 points, 4 done, 0 running elsewhere (or queued), 0 to run" in again.stdout
            and "started" not in again.stdout)


def test_another_grid_into_the_same_directory_is_refused(reference: Path) -> None:
    proc = subprocess.run(sweep_command(reference, grid=("Trainer.lr=[1e-3, 3e-3]", SCHEDULE)), capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert "holds another sweep (grid Trainer.lr: [1e-3, 2e-3] -> [1e-3, 3e-3])" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_killed_sweep_resumes_to_the_uninterrupted_points(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "killed"
    cmd = sweep_command(out)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    # the first point finished and the second begun (its run directory is written)
    kill_when(proc, lambda: _point_state(out, NAMES[0]) == "done" and (out / NAMES[1] / "metrics.jsonl").is_file())
    assert not (out / NAMES[2]).exists()
    again = run_ok(cmd)
    assert "1 done, 0 running elsewhere (or queued), 3 to run" in again.stdout, again.stdout
    for name in NAMES:
        assert_same_run(reference / name, out / name)


def test_submitit_local_executor_runs_the_job_array(reference: Path, tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    out = tmp_path / "submitit"
    run_ok(sweep_command(out, "--launcher", "submitit-local", grid=("Trainer.lr=[1e-3]",)))
    doc = json.loads((out / "sweep.json").read_text())
    (point,) = doc["points"]
    assert point["name"] == "lr=1e-3" and point["state"] == "done" and point["job_id"]
    assert list((out / "submitit").iterdir())  # submitit's job files
    # flow_matching is base.gin's schedule: this point is the reference's first
    assert_same_run(reference / NAMES[0], out / "lr=1e-3")


def test_an_optuna_study_resumes_after_a_kill(reference: Path, tmp_path: Path) -> None:
    optuna = pytest.importorskip("optuna")
    out = tmp_path / "optuna"
    cmd = sweep_command(out, "--optuna", "3", "--seed", "1")
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)

    def second_trial_started() -> bool:
        try:
            doc = json.loads((out / "sweep.json").read_text())
        except (OSError, ValueError):
            return False
        trials = {p["trial"]: p for p in doc["points"]}
        return trials.get(0, {}).get("state") == "done" and 1 in trials and trials[1]["state"] == "running"

    kill_when(proc, second_trial_started)
    run_ok(cmd)
    study = optuna.load_study(study_name="flowkit-sweep", storage=f"sqlite:///{out / 'optuna.db'}")
    trials = study.get_trials()
    assert [t.number for t in trials] == [0, 1, 2]  # the killed trial was finished, not replaced
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    from flowkit.report.compare import objective_value
    from flowkit.report.rundir import read_run
    from flowkit.sweep.naming import point_names as names_of

    for t in trials:
        point = Point(tuple((k, t.params[k]) for k in ("Trainer.lr", "Trainer.schedule")))
        (name,) = names_of([point])
        assert t.value == objective_value(read_run(reference / name), "val_loss_ema")
    assert study.best_value == min(t.value for t in trials)


# ---- the comparison of N runs -------------------------------------------------------


def _chromium_screenshot(page: Path, shot: Path, size: str = "1200,2400") -> bytes:
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not on PATH (CI installs Debian's chromium in .ci/run)")
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={shot.parent / 'profile'}", f"--screenshot={shot}", f"--window-size={size}", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    return shot.read_bytes()


def test_the_report_of_a_sweep_compares_its_points_in_chromium(reference: Path, tmp_path: Path) -> None:
    import re

    from flowkit.report.build import write_report
    from flowkit.report.compare import objective_value
    from flowkit.report.rundir import read_run

    files = write_report([reference], out=tmp_path / "report")
    md, html = files.markdown.read_text(), files.html.read_text()
    assert "# Comparison of 4 runs of the sweep reference\n" in md
    # one table: each point's differing bindings as columns, its figures, the best named
    assert "| run | state | steps | lr | schedule | last loss | best EMA val loss | text gain |" in md
    assert "| lr=2e-3,schedule=cosine_vpred | completed | 4 / 4 | 0.002 | cosine_vpred |" in md
    scores = {n: objective_value(read_run(reference / n), "val_loss_ema") for n in NAMES}
    best = min(scores, key=scores.get)
    assert f"Best by val_loss_ema (best EMA validation loss, lower is better): {best} = {scores[best]:.5g}" in md
    assert '<table class="sortable">' in html and "fkSort" in html
    assert (tmp_path / "report" / "report_files" / "compare-val_loss.png").is_file()
    shot = _chromium_screenshot(files.html, tmp_path / "shot.png")
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(tmp_path / "shot.png").convert("L"))
    assert pixels.shape == (2400, 1200) and (pixels < 128).mean() > 0.005 and len(shot) > 20_000
    # the sort runs in the browser: a page that clicks a header and prints the first row's run
    probe = tmp_path / "sorted.html"
    probe.write_text(html.replace("</body>", """<script>
var th = Array.prototype.find.call(document.querySelectorAll("table.sortable th"),
                                   function (h) { return h.textContent === "best EMA val loss"; });
th.click();
document.title = "FIRST:" + document.querySelector("table.sortable tbody tr td").textContent;
</script></body>"""))
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'profile2'}", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert re.search(r"<title>FIRST:(.*?)</title>", dom).group(1) == best


def test_a_comparison_of_fifty_runs_stays_readable(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "report"))
    from report_helpers import write_synthetic_run

    from flowkit.report.build import write_report
    from flowkit.report.render_html import png_size

    runs = [write_synthetic_run(tmp_path / f"r{k:02d}", "completed", config_extra=f"Trainer.ema_decay = 0.{900 + k}\n")
            for k in range(50)]
    files = write_report(runs, out=tmp_path / "cmp")
    md = files.markdown.read_text()
    assert md.startswith("# Comparison of 50 runs\n")  # no 50 names in the title
    assert "## r00: Summary" not in md and "## Config differences" not in md  # per-run detail left to each run
    assert md.count("| r") >= 50 and "| ema_decay |" in md.splitlines()[next(
        i for i, ln in enumerate(md.splitlines()) if ln.startswith("| run |"))]
    loss = (tmp_path / "cmp" / "report_files" / "compare-loss.png").read_bytes()
    width, height = png_size(loss)
    assert width > 700 and height < 1000  # the legend sits beside the axes, in columns
    assert len(files.html.read_text()) < 3_000_000
