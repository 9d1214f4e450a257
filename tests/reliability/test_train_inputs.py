"""What a training start is given, refused or explained before any step.

Each case goes through the real CLI (the Typer app in-process: the same ``guarded``
wrapper, the same one ``error:`` line and exit code as a shell) and checks that:

- ``--data`` stores of different encoders (same width, or another width) are refused,
  not trained on the first store's segments with the rest logged as ``wrong_encoder`` /
  ``wrong_dim``;
- ``--data S --data S`` (also by another spelling, a symlink, a shard and its folder) is
  refused, neither read twice nor silently de-duplicated;
- ``init-from STORE.zarr`` says it was given a store, not "no COMPLETE marker";
- init-from a parent of another encoder is refused in one line, neither a numpy
  broadcast error (another width) nor a silent start (the same width);
- resuming a run whose config.gin was deleted names ``--restore-config``, which brings it
  back, rather than a dead end ("not a flowkit run directory");
- init-from with a config of another network size takes the parent's network and says so
  in one line; a "starting from PARENT" line is printed, and a warning when the warm-up
  outlasts the run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from reliability_helpers import (
    DEBUG_GIN,
    TINY,
    invoke_in_process,
    one_error_in_process,
    write_store,
)

from flowkit.errors import CheckpointError, DataError, ResumeError


def _train(store_args: list[str | Path], out: Path, *extra: str, steps: int = 1) -> list[str]:
    bindings = [x for b in (*TINY, *extra) for x in ("-b", b)]
    data = [x for s in store_args for x in ("--data", str(s))]
    return ["train", str(DEBUG_GIN), *bindings, *data, "--out", str(out), "--steps", str(steps), "--device", "cpu"]


def _other_encoder_store(path: Path, *, dim: int = 8) -> Path:
    """A store like `write_store`'s whose latents another encoder made (``synthetic_b``)."""
    import numpy as np
    from reliability_helpers import segment

    from flowkit.data.store import StoreWriter

    rng = np.random.default_rng(5)
    writer = StoreWriter.create(path, encoder_name="synthetic_b", encoder_params={"dim": dim}, frame_rate=100.0,
                                sample_rate=16000, latent_dim=dim, latent_dtype="float32")
    for s in range(2):
        for k in range(8):
            writer.add(segment(k, s, rng, latent_dim=dim, split="val" if k >= 6 else "train"))
    return writer.commit()


# ---- --data --------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [8, 6], ids=["same_width", "other_width"])
def test_stores_of_different_encoders_are_refused_naming_both(store: Path, tmp_path: Path, dim: int,
                                                              capfd: pytest.CaptureFixture) -> None:
    other = _other_encoder_store(tmp_path / "other.zarr", dim=dim)
    out = tmp_path / "run"
    line = one_error_in_process(_train([store, other], out), capfd, DataError.exit_code, "mixes encoders", str(store),
                      "encoder.synthetic", str(other), "encoder.synthetic_b", f"{dim} channels")
    assert "prepare" in line
    assert not out.exists()  # nothing of the refused start is left behind


def test_shard_folders_of_different_encoders_are_refused(store: Path, tmp_path: Path,
                                                         capfd: pytest.CaptureFixture) -> None:
    folder = tmp_path / "shards"
    folder.mkdir()
    shutil.copytree(store, folder / "shard-00000-of-00002.zarr")
    _other_encoder_store(folder / "shard-00001-of-00002.zarr")
    one_error_in_process(_train([folder], tmp_path / "run"), capfd, DataError.exit_code, "mixes encoders",
               "shard-00000-of-00002.zarr in", "shard-00001-of-00002.zarr in", "encoder.synthetic_b")


@pytest.mark.parametrize("spelling", ["same", "dotdot", "symlink", "shard_and_folder"])
def test_the_same_store_twice_is_refused(store: Path, tmp_path: Path, spelling: str,
                                         capfd: pytest.CaptureFixture) -> None:
    first: Path = store
    if spelling == "same":
        second: Path = store
    elif spelling == "dotdot":
        second = store.parent / "x" / ".." / store.name
        (store.parent / "x").mkdir(exist_ok=True)
    elif spelling == "symlink":
        second = tmp_path / "link.zarr"
        second.symlink_to(store, target_is_directory=True)
    else:
        first = tmp_path / "shards"
        first.mkdir()
        for i in range(2):
            write_store(first / f"shard-{i:05d}-of-00002.zarr", seed=i)
        second = first / "shard-00001-of-00002.zarr"
    out = tmp_path / "run"
    one_error_in_process(_train([first, second], out), capfd, DataError.exit_code, "same store",
                         "refused, not de-duplicated", "give each store once")
    assert not out.exists()


# ---- init-from and resume ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 1-step debug run (tiny model) on the tiny store: a parent for init-from."""
    from flowkit.train import run

    root = tmp_path_factory.mktemp("parent")
    data = write_store(root / "tiny.zarr")
    out = root / "run"
    run.train([DEBUG_GIN], list(TINY), data=[data], out=out, steps=1, device="cpu")
    return out


def test_init_from_a_store_says_it_is_a_store(store: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    one_error_in_process([*_train([store], tmp_path / "run"), "--init-from", str(store)], capfd,
                         CheckpointError.exit_code, f"{store} is a latent store", "not a checkpoint or run", "--data")


@pytest.mark.parametrize("dim", [8, 6], ids=["same_width", "other_width"])
def test_init_from_a_parent_of_another_encoder_is_refused_naming_both(parent: Path, tmp_path: Path, dim: int,
                                                                      capfd: pytest.CaptureFixture) -> None:
    other = _other_encoder_store(tmp_path / "other.zarr", dim=dim)
    out = tmp_path / "child"
    one_error_in_process([*_train([other], out), "--init-from", str(parent)], capfd, ResumeError.exit_code,
               "init-from", "encoder.synthetic, 8 channels", f"encoder.synthetic_b, {dim} channels",
               "--encoder synthetic")
    assert not out.exists()


def test_resume_without_config_gin_offers_to_restore_it(parent: Path, tmp_path: Path,
                                                        capfd: pytest.CaptureFixture) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(parent, run_dir)
    saved = (run_dir / "config.gin").read_text(encoding="utf-8")
    (run_dir / "config.gin").unlink()
    one_error_in_process(["resume", run_dir, "--device", "cpu"], capfd, ResumeError.exit_code, "no config.gin",
               f"flowkit resume {run_dir} --restore-config")
    assert not (run_dir / "config.gin").exists()  # the refusal writes nothing
    code, out = invoke_in_process(["resume", run_dir, "--restore-config", "--steps", "2", "--device", "cpu"], capfd)
    assert code == 0, out
    assert "restored" in out and "config.gin" in out, out
    assert (run_dir / "config.gin").read_text(encoding="utf-8").splitlines()[0] == saved.splitlines()[0]
    assert "continuing" in out and "(step 1)" in out, out


@pytest.fixture(scope="module")
def child(parent: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """An init-from run of the parent whose config asks for another network size (the
    small preset) and a warm-up much longer than the run: (run dir, what it printed)."""
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    root = tmp_path_factory.mktemp("child")
    data = write_store(root / "tiny.zarr")
    argv = _train([data], root / "run", "model.dit.preset = 'small'", "lr_schedule.warmup_cosine.warmup_updates = 1000",
                  steps=2)
    result = CliRunner().invoke(app, [*argv, "--init-from", str(parent)])
    assert result.exit_code == 0, (result.output, result.exception)
    return root / "run", result.output


def test_init_from_says_where_it_starts_from(child: tuple[Path, str], parent: Path) -> None:
    _, out = child
    assert f"init-from: starting from {parent / 'checkpoints'}" in out, out


def test_init_from_takes_the_network_from_the_parent(child: tuple[Path, str]) -> None:
    run_dir, out = child
    assert "init-from: the model is the parent's network (preset 'small' -> 'tiny', dim 256 -> 64" in out, out
    assert "model.dit.preset = 'tiny'" in (run_dir / "config.gin").read_text(encoding="utf-8")


def test_a_warm_up_longer_than_the_run_is_one_warning(child: tuple[Path, str]) -> None:
    _, out = child
    warnings = [line for line in out.splitlines() if line.startswith("warning: the learning rate stays")]
    assert len(warnings) == 1, out
    assert "warmup_updates = 1000 is longer than the run" in warnings[0], warnings[0]
    assert "peaks at 2e-06 (update 2 of 2)" in warnings[0], warnings[0]  # 1e-3 * 2 / 1000


# ---- the probe says it is running ----------------------------------------------------------------


class _Parrot:
    """A recogniser that "hears" a fixed text at once (the probe's line, not its score, is tested)."""

    languages = ("en",)

    def transcribe(self, audio, sample_rate, language="en"):  # noqa: ANN001, ANN201
        return "la mora"

    def describe(self) -> dict[str, str]:
        return {"name": "asr.test_parrot", "model": "none", "version": "test"}


def test_a_probe_says_it_is_running(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from flowkit import registry

    registry.load_plugins(third_party=False)
    if ("asr", "test_parrot") not in {(c.kind, c.name) for c in registry.components("asr")}:
        registry.register("asr", "test_parrot")(_Parrot)
    probe = ("Trainer.probe = @Probe()", "Probe.asr = @asr.test_parrot()", "Probe.speaker = None",
             "Probe.quality = None", "Probe.sentences = 1", "Probe.solver_steps = 2", "Probe.every = 100",
             "Trainer.loggers = []", "Trainer.eval_every = 100", "Trainer.save_every = 100", "Trainer.log_every = 1")
    argv = ["train", str(DEBUG_GIN), *(x for b in probe for x in ("-b", b)), "--out", str(tmp_path / "run"),
            "--steps", "1", "--device", "cpu"]
    code, out = invoke_in_process(argv, capfd)
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith("probe: ")]
    assert any("the ceiling: 1 sentences" in line and "asr.test_parrot" in line for line in lines), out
    assert sum("synthesising 1 sentences x 1 draw(s)" in line for line in lines) == 2, out  # step 0 and the last


def test_the_parents_network_is_taken_whole(tmp_path: Path) -> None:
    """A parent whose preset differs but whose sizes equal the config's (an import records
    preset 'f5_base' with its own sizes): binding the preset alone would move every size the
    config leaves to its preset, so every field of the network is bound."""
    import json

    from flowkit import config, registry
    from flowkit.model.dit import DiTConfig
    from flowkit.train.run import _parent_network

    parent = tmp_path / "step-00000000"
    parent.mkdir()
    theirs = {**DiTConfig(preset="tiny").to_dict(), "preset": "f5_base", "arch": "f5_v1", "conditions": False}
    (parent / "meta.json").write_text(json.dumps({"model_config": theirs}), encoding="utf-8")
    config.parse([DEBUG_GIN], ["model.dit.conditions = False"])
    bindings, line = _parent_network(parent)
    assert line is not None and "preset 'tiny' -> 'f5_base'" in line and "dim" not in line, line
    config.parse([DEBUG_GIN], ["model.dit.conditions = False", *bindings])
    assert registry.build("model", "dit").to_dict() == theirs
