"""The whole F5-TTS path on the CPU: a random-weight F5 checkpoint in F5's released format
-> import-f5 -> init-from with gin/finetune_f5.gin on a store of real clips prepared with
vocos_mel -> a few steps -> report --samples 1 -> export-f5; and a kill -9 / resume of that
fine-tune gives the same bits as the uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from f5_files import write_f5_safetensors

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from state_compare import assert_same_tensors, final_state, records  # noqa: E402

STEPS = 6
#: the small F5 size of the parity fixtures, and a CPU-sized batch
SMALL = ["model.dit.dim = 256", "model.dit.depth = 4", "model.dit.heads = 4", "model.dit.ff_mult = 2",
         "model.dit.text_dim = 128", "model.dit.conv_layers = 2", "batch_sampler.frame_budget.frame_budget = 900",
         "batch_sampler.frame_budget.max_items = 4", "Trainer.save_every = 2", "Trainer.eval_every = 3",
         "Trainer.eval_batches = 1", "Trainer.log_every = 1", "Trainer.lr = 1e-4",
         "lr_schedule.warmup_cosine.warmup_updates = 2"]
CLIPS = ["allison_en_pm-invalid-option", "allison_en_pbx-parkingfailed", "allison_en_vm-undelete",
         "june_fr_agent-loginok", "june_fr_agent-pass", "carlo_it_pm-invalid-option", "carlo_it_agent-pass",
         "maxim_ru_agent-pass", "maxim_ru_agent-incorrect", "allison_es_vm-goodbye"]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _flowkit(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "flowkit", *args], env=_env(), capture_output=True, text=True)
    assert not check or proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _init_from_argv(parent: Path, store: Path, out: Path) -> list[str]:
    bindings = [x for b in SMALL for x in ("-b", b)]
    return ["init-from", str(parent), str(REPO / "gin" / "finetune_f5.gin"), *bindings, "--data", str(store),
            "--out", str(out), "--steps", str(STEPS), "--device", "cpu"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory, request) -> tuple[Path, Path]:
    corpus = REPO.parent / "shared" / "data" / "asterisk-5voice"
    if not (corpus / "metadata.csv").is_file():
        pytest.skip(f"full corpus not found at {corpus}")
    root = tmp_path_factory.mktemp("f5e2e")
    ckpt = write_f5_safetensors(root / "F5TTS_v1_small.safetensors")
    _flowkit("import-f5", str(ckpt), "--out", str(root / "f5"))
    lines = {line.split("|", 1)[0]: line for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines()}
    (root / "corpus").mkdir()
    (root / "corpus" / "metadata.csv").write_text("\n".join(lines[c] for c in CLIPS) + "\n", encoding="utf-8")
    (root / "corpus" / "wavs").symlink_to(corpus / "wavs")
    _flowkit("prepare", str(root / "corpus"), "--encoder", "vocos_mel", "--out", str(root / "store.zarr"), "--quiet")
    return root / "f5", root / "store.zarr"


@pytest.fixture(scope="module")
def finetuned(imported: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The uninterrupted fine-tune (both tests use it: one fine-tune less of CI time)."""
    parent, store = imported
    run = tmp_path_factory.mktemp("ref") / "mine"
    return run, _flowkit(*_init_from_argv(parent, store, run)).stdout


def test_import_finetune_report_export(finetuned: tuple[Path, str], tmp_path: Path) -> None:
    run, stdout = finetuned
    start = [line for line in stdout.splitlines() if line.startswith("init-from: the data hold")]
    tokens = [line for line in start if "token(s) the parent's vocabulary lacks" in line]
    assert len(tokens) == 1, stdout  # the added tokens, listed in one line at start (the added languages in another)
    info = json.loads((run / "run_info.json").read_text())
    added = info["init_from"]["added_tokens"]
    assert added["rows"][0] == 41 and added["rows"][1] == 41 + len(added["tokens"]) and "mean" in added["init"]
    assert "ы" in added["tokens"] or "и" in added["tokens"]  # Russian letters are not in the 40 first tokens
    state = final_state(run)
    assert (state["model"]["text.embed.weight"].shape[0] == state["ema"]["shadow"]["text.embed.weight"].shape[0]
            == added["rows"][1])
    steps = [r for r in records(run) if r.get("kind") == "train"]
    assert len(steps) == STEPS

    report = _flowkit("report", str(run), "--samples", "1")
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "euler, sway -1" in md, report.stdout  # F5's inference defaults, recorded per sample
    assert list(run.glob("**/sample1-generated.wav")) or "sample1" in (run / "report.html").read_text(encoding="utf-8")

    out = tmp_path / "f5_mine"
    _flowkit("export-f5", str(run), "--out", str(out))
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(vocab) == added["rows"][1] - 1 and vocab[40:] == added["tokens"]
    from safetensors.torch import load_file

    tensors = load_file(str(out / "model.safetensors"))
    assert tensors["ema_model.transformer.text_embed.text_embed.weight"].shape[0] == added["rows"][1]
    assert all(k.startswith("ema_model.transformer.") for k in tensors)
    again = _flowkit("import-f5", str(out / "model.safetensors"), "--config", "F5TTS_v1_Base", "--out",
                     str(tmp_path / "back"))
    assert again.returncode == 0


def test_finetune_kill_and_resume_is_bit_identical(imported: tuple[Path, Path], finetuned: tuple[Path, str],
                                                   tmp_path: Path) -> None:
    parent, store = imported
    ref = finetuned[0]
    run = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "flowkit", *_init_from_argv(parent, store, run)], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not (run / "checkpoints" / "step-00000002" / "COMPLETE").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the fine-tune ended before its first checkpoint"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = _flowkit("resume", str(run), "--device", "cpu")
    assert resumed.returncode == 0
    assert_same_tensors(final_state(ref), final_state(run))
    timing = {"frames_per_s", "step_s", "data_s"}
    strip = [{k: v for k, v in r.items() if k not in timing and k != "time"} for r in records(ref)]
    again = [{k: v for k, v in r.items() if k not in timing and k != "time"} for r in records(run)]
    assert [r for r in strip if r.get("kind") == "train"] == [r for r in again if r.get("kind") == "train"]
