"""Inputs from outside that must neither pass silently nor end in a traceback: a prompt
holding NaN, a missing prompt, F5-TTS files holding NaN or infinity, a checkpoint whose
weights went non-finite, half-precision F5 files, a pickled object in a ``.pt``, a folder
given as the checkpoint, weights of mismatched shapes, and the round trip through
export-f5 and import-f5 without ``--config``. Each is one ``error:`` line naming the
file, the key or the value and the fix, or (half precision, the round trip) it works and
says what it read.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from reliability_helpers import REPO

from flowkit.errors import CheckpointError, DataError

sys.path.insert(0, str(REPO / "tests" / "interop"))
from f5_files import f5_transformer_state, write_f5_safetensors, write_vocab  # noqa: E402


def _cli(argv: list, capfd: pytest.CaptureFixture) -> tuple[int, list[str]]:
    """Run the command in-process: (exit code, its non-empty output lines without warnings)."""
    from typer.testing import CliRunner

    from flowkit.cli.app import app

    capfd.readouterr()
    result = CliRunner().invoke(app, [str(a) for a in argv])
    out = capfd.readouterr().err + result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in out, out
    return result.exit_code, [line for line in out.splitlines() if line.strip() and not line.startswith("warning: ")]


def _one_error_line(argv: list, capfd: pytest.CaptureFixture, code: int, *fragments: str) -> str:
    exit_code, lines = _cli(argv, capfd)
    assert exit_code == code, lines
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run imported from a small random-weight F5 checkpoint."""
    from flowkit.interop.f5_run import import_f5

    root = tmp_path_factory.mktemp("f5")
    import_f5(write_f5_safetensors(root / "F5TTS_v1_small.safetensors"), root / "run")
    return root / "run"


def _f5_file(path: Path, change=None, dtype: torch.dtype | None = None, name: str = "small_v1") -> Path:
    """An F5 release-format file of the small fixture sizes, with ``change(state)`` applied
    (F5 keys without the ``ema_model.transformer.`` prefix) and stored in ``dtype``."""
    from safetensors.torch import save_file

    state = f5_transformer_state(name)
    if change is not None:
        change(state)
    tensors = {f"ema_model.transformer.{k}": (v.to(dtype) if dtype is not None else v) for k, v in state.items()}
    tensors["ema_model.step"] = torch.tensor(1200)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path))
    write_vocab(path.parent / "vocab.txt", name)
    return path


# ---- synthesize's prompt -------------------------------------------------------------------


def test_a_prompt_holding_nan_is_one_line(imported: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    audio = (0.1 * np.sin(np.arange(24000) * 0.05)).astype(np.float32)
    audio[1000:1100] = np.nan
    prompt = tmp_path / "nan.wav"
    sf.write(str(prompt), audio, 24000, subtype="FLOAT")
    _one_error_line(["synthesize", imported, "--text", "ab", "--seconds", "0.5", "--steps", "1", "--prompt", prompt,
                     "--prompt-text", "ab", "--out", tmp_path / "a.wav"], capfd, DataError.exit_code,
                    str(prompt), "100 of 24000 samples are NaN or infinite", "clean recording")
    assert not (tmp_path / "a.wav").exists()


def test_a_missing_prompt_says_no_such_file(imported: Path, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    missing = tmp_path / "nosuch.wav"
    line = _one_error_line(["synthesize", imported, "--text", "ab", "--steps", "1", "--prompt", missing,
                            "--prompt-text", "ab", "--out", tmp_path / "a.wav"], capfd, DataError.exit_code,
                           f"--prompt {missing}: no such file")
    assert "decode" not in line and "System error" not in line


# ---- non-finite weights --------------------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_import_refuses_non_finite_weights_naming_the_key(value: float, tmp_path: Path,
                                                          capfd: pytest.CaptureFixture) -> None:
    def poison(state):
        state["transformer_blocks.2.ff.ff.2.weight"][3, :5] = value

    ckpt = _f5_file(tmp_path / "F5TTS_v1_bad.safetensors", poison)
    counts = "5 NaN and 0 infinite" if np.isnan(value) else "0 NaN and 5 infinite"
    _one_error_line(["import-f5", ckpt, "--out", tmp_path / "run"], capfd, CheckpointError.exit_code,
                    str(ckpt), "transformer_blocks.2.ff.ff.2.weight holds " + counts, "nothing was imported")
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_whose_weights_went_non_finite_is_refused_at_load(imported: Path, tmp_path: Path,
                                                                      capfd: pytest.CaptureFixture) -> None:
    """A checkpoint written with NaN in one weight (a damaged file or a diverged run):
    synthesize, init-from and resume load through the same strict loader, which names it."""
    from flowkit.checkpoints.files import load_checkpoint, save_checkpoint

    loaded = load_checkpoint(imported / "checkpoints" / "step-00000000")
    state = loaded.state
    state["ema"]["shadow"]["final.proj.weight"][0, 0] = float("nan")
    meta = {k: v for k, v in loaded.meta.items() if k not in ("format_version", "step")}
    save_checkpoint(tmp_path / "run" / "checkpoints", 0, state, meta)
    _one_error_line(["synthesize", tmp_path / "run", "--text", "ab", "--seconds", "0.5", "--steps", "1",
                     "--out", tmp_path / "a.wav"], capfd, CheckpointError.exit_code,
                    "final.proj.weight", "NaN or infinite", "older checkpoint")
    assert not (tmp_path / "a.wav").exists()


# ---- F5-TTS files -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_f5_files_import_and_say_their_dtype(dtype: torch.dtype, tmp_path: Path,
                                                            capfd: pytest.CaptureFixture) -> None:
    """Weights stored in float16 / bfloat16 (rotary table included) are upcast to float32:
    the run holds exactly the half-precision values (the upcast is exact), and the command
    says which dtype it read."""
    from flowkit.checkpoints.files import load_checkpoint

    ckpt = _f5_file(tmp_path / "F5TTS_v1_half.safetensors", dtype=dtype)
    code, lines = _cli(["import-f5", ckpt, "--out", tmp_path / "run"], capfd)
    name = str(dtype).removeprefix("torch.")
    assert code == 0 and f"({name} weights, as float32)" in lines[-1], lines
    loaded = load_checkpoint(tmp_path / "run" / "checkpoints" / "step-00000000")
    assert loaded.meta["imported_from"]["dtype"] == name
    stored = f5_transformer_state()["proj_out.weight"].to(dtype).float()
    assert loaded.state["ema"]["shadow"]["final.proj.weight"].dtype == torch.float32
    assert torch.equal(loaded.state["ema"]["shadow"]["final.proj.weight"], stored)


def test_a_pickled_object_in_a_pt_file_is_named_without_torchs_advice(tmp_path: Path,
                                                                     capfd: pytest.CaptureFixture) -> None:
    ckpt = tmp_path / "model_1200.pt"
    torch.save({"model_state_dict": {}, "ema_model_state_dict": {}, "counts": collections.Counter(a=1),
                "where": Path("x")}, ckpt)
    write_vocab(tmp_path / "vocab.txt")
    line = _one_error_line(["import-f5", ckpt, "--out", tmp_path / "run", "--config", "F5TTS_v1_Base"], capfd,
                           CheckpointError.exit_code, str(ckpt), "not only tensors", "does not unpickle")
    assert "weights_only" not in line and "trust" not in line and "\x1b" not in line, line


@pytest.mark.parametrize("what", ["a folder of checkpoints", "a flowkit run"])
def test_a_folder_given_as_the_checkpoint_says_which_file(what: str, imported: Path, tmp_path: Path,
                                                          capfd: pytest.CaptureFixture) -> None:
    if what == "a flowkit run":
        folder, fragments = imported, ("flowkit run", "init-from", "export-f5")
    else:
        folder = tmp_path / "F5TTS_v1_Base"
        _f5_file(folder / "model_1200.safetensors")
        fragments = ("is a folder", str(folder / "model_1200.safetensors"))
    line = _one_error_line(["import-f5", folder, "--out", tmp_path / "run"], capfd, CheckpointError.exit_code,
                           str(folder), *fragments)
    assert "no such file" not in line


def test_a_shape_error_names_f5s_key_and_flowkits(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    def splice(state):
        state["transformer_blocks.1.attn.to_out.0.weight"] = torch.zeros(7, 7)

    ckpt = _f5_file(tmp_path / "F5TTS_v1_spliced.safetensors", splice)
    _one_error_line(["import-f5", ckpt, "--out", tmp_path / "run"], capfd, CheckpointError.exit_code,
                    "transformer_blocks.1.attn.to_out.0.weight has shape (7, 7)", "needs (256, 256)",
                    "flowkit's blocks.1.attn.out.weight", "nothing was imported")


@pytest.mark.parametrize("config", ["F5TTS_v1_Base", "F5TTS_Base"])
def test_export_then_import_needs_no_config(config: str, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    """export-f5 records the F5 config in flowkit_export.json beside model.safetensors (F5-TTS
    reads only the model and vocab.txt); import-f5 --config auto reads it back."""
    name = "small_v1" if config == "F5TTS_v1_Base" else "small_base"
    ckpt = _f5_file(tmp_path / "src" / "model_1200.safetensors", name=name)
    assert _cli(["import-f5", ckpt, "--out", tmp_path / "run", "--config", config], capfd)[0] == 0
    code, lines = _cli(["export-f5", tmp_path / "run", "--out", tmp_path / "export"], capfd)
    assert code == 0, lines
    record = json.loads((tmp_path / "export" / "flowkit_export.json").read_text())
    assert record["f5_config"] == config
    code, lines = _cli(["import-f5", tmp_path / "export" / "model.safetensors", "--out", tmp_path / "again"], capfd)
    assert code == 0 and f"as {config}" in lines[-1], lines
    again = json.loads((tmp_path / "again" / "checkpoints" / "step-00000000" / "meta.json").read_text())
    assert again["imported_from"]["config"] == config
    # another file put in the export's place is not taken for the recorded one
    _f5_file(tmp_path / "export" / "model.safetensors", name=name, dtype=torch.float16)
    exit_code, lines = _cli(["import-f5", tmp_path / "export" / "model.safetensors", "--out", tmp_path / "third"],
                            capfd)
    assert exit_code == 2 and "give --config" in lines[0], lines
