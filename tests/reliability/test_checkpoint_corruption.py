"""Damaged checkpoints: a truncated, bit-flipped, manifest-less or marker-less newest
checkpoint is detected on resume, skipped with a warning, and the previous valid one is
used (the run still ends equal to an uninterrupted one); an empty or all-corrupt
checkpoint directory is one clear error; loading is strict (an unexpected key is named);
exported safetensors weights are labelled EMA or raw and equal the checkpoint's."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from reliability_helpers import DEBUG_GIN, TINY
from state_compare import assert_same_tensors, final_state, records

from flowkit.checkpoints import files as checkpoint
from flowkit.errors import CheckpointError, ResumeError
from flowkit.train import run

STEPS = 3
KEEP = "Trainer.keep_last = 3"


@pytest.fixture(scope="module")
def reference(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "run"
    run.train([DEBUG_GIN], [*TINY, KEEP], data=[store], out=out, steps=STEPS, device="cpu")
    assert [s for s, _ in checkpoint.list_checkpoints(out / "checkpoints")] == [1, 2, 3]
    return out


def _newest(run_dir: Path) -> Path:
    return checkpoint.list_checkpoints(run_dir / "checkpoints")[-1][1]


def _truncate(ckpt: Path) -> None:
    state = ckpt / "state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])


def _flip_state(ckpt: Path) -> None:
    data = bytearray((ckpt / "state.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size: only the checksum can tell
    (ckpt / "state.pt").write_bytes(bytes(data))


def _flip_meta(ckpt: Path) -> None:
    text = (ckpt / "meta.json").read_text()
    (ckpt / "meta.json").write_text(text.replace('"seed": 0', '"seed": 1'))


def _no_manifest(ckpt: Path) -> None:
    (ckpt / "manifest.json").unlink()


def _no_marker(ckpt: Path) -> None:
    (ckpt / "COMPLETE").unlink()


def _missing_state(ckpt: Path) -> None:
    (ckpt / "state.pt").unlink()


def _pickled_object(ckpt: Path) -> None:
    """A state.pt holding a pickled object, its manifest rewritten to match: it verifies, and
    only the loader (weights_only) can refuse it."""
    import argparse
    import hashlib

    torch.save({"payload": argparse.Namespace(x=1)}, ckpt / "state.pt")
    data = (ckpt / "state.pt").read_bytes()
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["files"]["state.pt"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (ckpt / "manifest.json").write_text(json.dumps(manifest))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated_file": (_truncate, "truncated"),
    "flipped_bytes": (_flip_state, "sha256"),
    "flipped_meta": (_flip_meta, "sha256"),
    "missing_manifest": (_no_manifest, "manifest.json"),
    "missing_marker": (_no_marker, "COMPLETE"),
    "missing_state_file": (_missing_state, "state.pt is missing"),
    "pickled_object": (_pickled_object, "holds pickled Python objects, which flowkit never loads"),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_newest_checkpoint_is_skipped_with_a_warning(case: str, reference: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    damage, reason = DAMAGE[case]
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    damage(_newest(out))
    with pytest.raises(CheckpointError, match=reason):
        checkpoint.load_checkpoint(_newest(out))  # never a silent half-load
    outcome = run.resume(out, device="cpu")
    assert outcome.status == "completed" and outcome.step == STEPS
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "step-00000003" in warning[0] and reason in warning[0], warning
    info = json.loads((out / "resume_info-00000002.json").read_text())
    assert reason in info["skipped_checkpoints"][0][1]
    assert_same_tensors(final_state(reference), final_state(out))
    assert records(reference) == records(out)


def test_an_empty_checkpoint_directory_continues_from_best(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    shutil.rmtree(out / "checkpoints")
    (out / "checkpoints").mkdir()
    best, _ = checkpoint.find_latest(out / "best")
    assert best is not None
    outcome = run.resume(out, device="cpu")  # best/ is the newest valid checkpoint
    assert outcome.status == "completed"
    assert outcome.step == checkpoint.load_checkpoint(best).step


def test_an_empty_step_directory_is_skipped(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    (out / "checkpoints" / "step-00000009").mkdir()
    path, skipped = checkpoint.find_latest(out / "checkpoints")
    assert path is not None and path.name == "step-00000003"
    assert skipped[0][0].name == "step-00000009" and "COMPLETE" in skipped[0][1]


def test_all_checkpoints_corrupt_is_one_clear_error(reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    for sub in ("checkpoints", "best"):  # best/ too: with a valid best/ the run continues from it
        for _, ckpt in checkpoint.list_checkpoints(out / sub):
            _flip_state(ckpt)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    with pytest.raises(ResumeError) as info:
        run.resume(out, device="cpu")
    message = str(info.value)
    assert "\n" not in message and "no valid checkpoint" in message and "nothing was changed" in message
    assert all(f"step-0000000{s}" in message for s in (1, 2, 3)), message
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before  # never started over on top of them


def _rewrite_state(ckpt: Path, change: Callable[[dict], None]) -> None:
    """Edit state.pt and re-seal the manifest, as a buggy tool (not a disk) would."""
    import hashlib

    state = torch.load(ckpt / "state.pt", weights_only=True)
    change(state)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    (ckpt / "state.pt").write_bytes(buffer.getvalue())
    manifest = json.loads((ckpt / "manifest.json").read_text())
    manifest["files"]["state.pt"] = {"sha256": hashlib.sha256(buffer.getvalue()).hexdigest(),
                                     "bytes": len(buffer.getvalue())}
    (ckpt / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("kind", ["unexpected", "missing"])
def test_loading_is_strict_and_names_the_key(kind: str, reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    ckpt = checkpoint.list_checkpoints(out / "checkpoints")[-2][1]  # step 2: resume would load it
    shutil.rmtree(_newest(out))
    first = next(iter(torch.load(ckpt / "state.pt", weights_only=True)["model"]))

    def change(state: dict) -> None:
        if kind == "unexpected":
            state["model"]["blocks.99.surprise"] = torch.zeros(1)
        else:
            del state["model"][first]

    _rewrite_state(ckpt, change)
    name = "blocks.99.surprise" if kind == "unexpected" else first
    with pytest.raises(CheckpointError, match=rf"'{name}' is {kind}"):
        run.resume(out, device="cpu")


@pytest.mark.parametrize("which", ["ema", "raw"])
def test_exported_safetensors_are_labelled_and_load_strictly(which: str, reference: Path, tmp_path: Path) -> None:
    from safetensors import safe_open
    from safetensors.torch import load_file

    ckpt = _newest(reference)
    out = checkpoint.export_safetensors(ckpt, tmp_path / f"{which}.safetensors", which=which)
    with safe_open(str(out), "pt") as f:
        meta = f.metadata()
    assert meta["weights"] == which and meta["step"] == str(STEPS)
    assert json.loads(meta["model_config"]) and json.loads(meta["latent_stats"])
    state = checkpoint.load_checkpoint(ckpt).state
    expected = dict(state["model"])
    if which == "ema":
        expected.update(state["ema"]["shadow"])
    assert_same_tensors(expected, load_file(str(out)))
    if which == "ema":
        assert any(not torch.equal(state["model"][k], v) for k, v in state["ema"]["shadow"].items())
    with pytest.raises(CheckpointError, match="'ema' or 'raw'"):
        checkpoint.export_safetensors(ckpt, tmp_path / "x.safetensors", which="best")


@pytest.mark.parametrize("entry", ["metrics.jsonl", "checkpoints"])
def test_a_run_entry_of_the_wrong_kind_is_one_resume_error(entry: str, reference: Path, tmp_path: Path) -> None:
    """metrics.jsonl a folder, or checkpoints a file: refused before anything is written."""
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    target = out / entry
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    if entry == "checkpoints":
        target.write_text("not a folder\n")
    else:
        target.mkdir()
    before = sorted(p.name for p in out.iterdir())
    for call in (lambda: run.resume(out, device="cpu"),
                 lambda: run.train([DEBUG_GIN], [*TINY, KEEP], out=out, steps=STEPS, device="cpu")):
        with pytest.raises(ResumeError, match=rf"{entry} is a (file|folder), but a run keeps a (folder|file) there"):
            call()
    assert sorted(p.name for p in out.iterdir()) == before
