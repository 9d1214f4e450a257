"""A run's CPU kernels (flowkit.converters.cpu.choose_cpu_kernels) are printed at start,
recorded in run_info and every checkpoint, and a resumed run re-uses them, so it trains the
same bits as a run that never stopped even where the environment now says otherwise."""

from __future__ import annotations

import json
from pathlib import Path

from state_compare import assert_same_tensors, final_state, records
from train_helpers import train, train_stopped_at

from flowkit.checkpoints import files as checkpoint
from flowkit.converters.cpu import DEFAULT_KERNELS
from flowkit.train import run

# the tiny model's products have fewer rows than oneDNN's linear threshold, but its position
# convolution runs whichever grouped-convolution kernel is in force: the non-default one here
ENV, KERNEL = "FLOWKIT_CPU_GROUPED_CONV", "onednn"
assert DEFAULT_KERNELS["grouped_conv"] != KERNEL


def test_resume_re_uses_the_recorded_kernels_and_trains_the_same_bits(tiny_store: Path, tmp_path: Path, monkeypatch,
                                                                      capsys) -> None:
    monkeypatch.setenv(ENV, KERNEL)
    reference = tmp_path / "ref"
    assert train(tiny_store, reference, steps=8).status == "completed"
    assert f"grouped conv={KERNEL} ({ENV} = {KERNEL})" in capsys.readouterr().out
    info = json.loads((reference / "run_info.json").read_text())
    assert info["cpu_kernels"]["kernels"]["grouped_conv"] == KERNEL

    out = tmp_path / "run"
    train_stopped_at(monkeypatch, tiny_store, out, 3)
    last = checkpoint.list_checkpoints(out / "checkpoints")[-1][1]
    assert checkpoint.load_checkpoint(last).meta["cpu_kernels"]["kernels"]["grouped_conv"] == KERNEL
    monkeypatch.delenv(ENV)  # a resume elsewhere: the measurement or the default would pick another kernel
    capsys.readouterr()
    assert run.resume(out, device="cpu").status == "completed"
    assert f"grouped conv={KERNEL} (recorded)" in capsys.readouterr().out
    resumed = json.loads((out / "resume_info-00000003.json").read_text())
    assert resumed["cpu_kernels"]["kernels"]["grouped_conv"] == KERNEL
    assert_same_tensors(final_state(reference), final_state(out))
    assert records(reference) == records(out)


def test_a_run_without_cpu_kernels_trains_torchs_own_layers_and_records_none(tiny_store: Path, tmp_path: Path,
                                                                              monkeypatch, capsys) -> None:
    """``Trainer.cpu_kernels = False``: no converter, nothing measured or printed, ``None`` in
    run_info and every checkpoint's meta; with ``Trainer.activation_checkpointing = True`` the
    blocks are checkpointed from the first step (the model is checked as the loop gets it)."""
    from flowkit.converters.checkpointing import is_checkpointed
    from flowkit.converters.cpu_kernels import CpuDropout, CpuLinear
    from flowkit.train import loop

    seen = []
    real = loop.TrainingLoop.__init__

    def spy(self, settings, parts, **kw):
        seen.append(({type(m) for m in parts.model.modules()}, is_checkpointed(parts.model)))
        real(self, settings, parts, **kw)

    monkeypatch.setattr(loop.TrainingLoop, "__init__", spy)
    out = tmp_path / "plain"
    assert train(tiny_store, out, "Trainer.cpu_kernels = False", "Trainer.activation_checkpointing = True",
                 steps=2).status == "completed"
    assert "cpu kernels:" not in capsys.readouterr().out
    kinds, checkpointed = seen[0]
    assert not {CpuLinear, CpuDropout} & kinds and checkpointed
    assert json.loads((out / "run_info.json").read_text())["cpu_kernels"] is None
    last = checkpoint.list_checkpoints(out / "checkpoints")[-1][1]
    assert checkpoint.load_checkpoint(last).meta["cpu_kernels"] is None
