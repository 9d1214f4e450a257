"""A report says what it could not read: a damaged line inside metrics.jsonl (not called a
torn last line), a run file that does not parse, and sweep points whose run directory is gone."""

from __future__ import annotations

import json
from pathlib import Path

from report_helpers import write_synthetic_run

from flowkit.report.compare import comparison_sections, expand_sweeps
from flowkit.report.rundir import read_run
from flowkit.report.summary import _facts


def _facts_text(run) -> dict[str, str]:
    return dict(_facts(run).items)


def test_a_damaged_line_inside_metrics_and_a_garbled_run_info_are_said(tmp_path: Path) -> None:
    root = write_synthetic_run(tmp_path / "r", "completed")
    lines = (root / "metrics.jsonl").read_text().splitlines()
    lines[3] = lines[3][: len(lines[3]) // 2]  # damaged in the middle of the file
    (root / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (root / "run_info.json").write_text('{"seed": 0, "device": ')
    run = read_run(root)
    assert run.torn_lines == 1 and run.torn_inside and run.damaged == ("run_info.json",)
    facts = _facts_text(run)
    assert "damaged lines inside the file" in facts["metrics.jsonl"] and "torn last line" not in facts["metrics.jsonl"]
    assert facts["damaged files"].startswith("run_info.json cannot be read as JSON")


def test_a_torn_last_line_is_still_called_so(tmp_path: Path) -> None:
    run = read_run(write_synthetic_run(tmp_path / "live", "in_progress"))
    assert run.torn_lines == 1 and not run.torn_inside and run.damaged == ()
    assert "the last line, torn" in _facts_text(run)["metrics.jsonl"]


def test_a_sweep_point_whose_run_is_gone_is_named(tmp_path: Path) -> None:
    sweep = tmp_path / "sw"
    write_synthetic_run(sweep / "lr=1e-3", "completed")
    points = [{"name": "lr=1e-3", "bindings": ["Trainer.lr = 1e-3"], "state": "done", "attempts": 1},
              {"name": "lr=2e-3", "bindings": ["Trainer.lr = 2e-3"], "state": "done", "attempts": 1},
              {"name": "lr=4e-3", "bindings": ["Trainer.lr = 4e-3"], "state": "pending", "attempts": 0}]
    (sweep / "sweep.json").write_text(json.dumps({"version": 1, "spec": {}, "points": points}))
    paths, info = expand_sweeps([sweep])
    assert paths == [sweep / "lr=1e-3"] and info is not None and info.missing == ("lr=2e-3",)
    sections = comparison_sections([read_run(p) for p in paths], sweep=info)
    notes = [getattr(b, "text", "") for b in sections[0].blocks]
    assert any(n.startswith("Missing: 1 point(s) of the sweep were started but their run directory is gone (lr=2e-3)")
               for n in notes), notes


def test_the_comparison_has_one_steps_column_and_best_sim_skips_step_0(tmp_path: Path) -> None:
    """Runs that differ in Trainer.steps keep one "steps" column (the binding's column is
    titled Trainer.steps), and "best probe SIM" is not the untrained model's at step 0."""
    runs = []
    for total in (40, 60):
        root = write_synthetic_run(tmp_path / f"r{total}", "completed", total=total)
        with (root / "metrics.jsonl").open("a") as f:
            for step, sim in ((0, 0.9), (20, 0.4), (40, 0.5)):
                f.write(json.dumps({"kind": "probe", "step": step, "probe_sim": sim, "probe_wer": 1.0 - sim}) + "\n")
        runs.append(read_run(root))
    table = next(b for b in comparison_sections(runs)[0].blocks if hasattr(b, "header"))
    assert table.header.count("steps") == 1 and "Trainer.steps" in table.header, table.header
    sim = table.header.index("best probe SIM")
    assert [row[sim] for row in table.rows] == ["0.5", "0.5"]


def test_curves_are_labelled_by_run_name_and_by_bindings_only_where_names_clash(tmp_path: Path) -> None:
    from flowkit.report.compare import config_differences, run_labels

    named = [read_run(write_synthetic_run(tmp_path / name, "completed", config_extra=f"Trainer.lr = {lr}\n"))
             for name, lr in (("baseline", 1e-3), ("faster", 2e-3))]
    assert run_labels(named, config_differences([r.config_text for r in named])) == ["baseline", "faster"]
    clash = [read_run(write_synthetic_run(tmp_path / parent / "run", "completed", config_extra=f"Trainer.lr = {lr}\n"))
             for parent, lr in (("a", 1e-3), ("b", 2e-3))]
    labels = run_labels(clash, config_differences([r.config_text for r in clash]))
    assert len(set(labels)) == 2 and all("lr=" in label for label in labels), labels
