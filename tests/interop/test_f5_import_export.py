"""flowkit import-f5 / export-f5 with random-weight checkpoints in F5-TTS's file formats."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from f5_files import FIXTURES, f5_transformer_state, write_f5_pt, write_f5_safetensors
from numerics import VELOCITY_MAX_ABS
from typer.testing import CliRunner

from flowkit.checkpoints.files import load_checkpoint
from flowkit.cli.app import app
from flowkit.errors import CheckpointError, ConfigError
from flowkit.interop import f5 as f5_interop
from flowkit.interop.f5_run import export_f5, import_f5

runner = CliRunner()


def _cli(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_imported_run_gives_f5s_velocity(tmp_path: Path) -> None:
    """The run an import writes, loaded by flowkit.interop.f5.load, equals F5's own DiT."""
    ckpt = write_f5_safetensors(tmp_path / "F5TTS_v1_small.safetensors")
    result = _cli("import-f5", str(ckpt), "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    loaded = load_checkpoint(tmp_path / "run" / "checkpoints" / "step-00000000")
    assert loaded.meta["encoder"]["name"] == "vocos_mel"
    assert loaded.meta["imported_from"]["config"] == "F5TTS_v1_Base"
    assert loaded.meta["latent_stats"]["mean"] == [0.0] * 100 and loaded.meta["latent_stats"]["std"] == [1.0] * 100
    assert loaded.state["ema"]["num_updates"] == 1200
    model = f5_interop.load(tmp_path / "run")
    data = np.load(FIXTURES / "dit_small_v1.npz")
    x, cond, text, time, mask = (torch.from_numpy(data[f"in_{k}"]) for k in ("x", "cond", "text", "time", "mask"))
    with torch.no_grad():
        for masked in (0, 1):
            got = model(x, cond, text, time, mask=mask if masked else None)
            keep = mask if masked else torch.ones_like(mask)
            assert (float((got - torch.from_numpy(data[f"out_mask{masked}_a0_t0"])).abs()[keep].max())
                    <= VELOCITY_MAX_ABS)


def test_training_pt_keeps_raw_and_ema_apart(tmp_path: Path) -> None:
    ckpt = write_f5_pt(tmp_path / "model_1200.pt")
    import_f5(ckpt, tmp_path / "run", config="F5TTS_v1_Base")
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "step-00000000").state
    ema, raw = f5_transformer_state(), f5_transformer_state(seed_offset=1)  # as write_f5_pt seeds them
    assert torch.equal(state["ema"]["shadow"]["final.proj.weight"], ema["proj_out.weight"])
    assert torch.equal(state["model"]["final.proj.weight"], raw["proj_out.weight"])
    assert not torch.equal(ema["proj_out.weight"], raw["proj_out.weight"])


def test_unknown_and_missing_keys_are_one_line_errors(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    good = write_f5_safetensors(tmp_path / "F5TTS_v1.safetensors")
    tensors = load_file(str(good))
    extra = dict(tensors, **{"ema_model.transformer.extra_head.weight": torch.zeros(2)})
    save_file(extra, str(tmp_path / "F5TTS_v1_extra.safetensors"))
    result = _cli("import-f5", str(tmp_path / "F5TTS_v1_extra.safetensors"), "--out", str(tmp_path / "a"))
    assert result.exit_code != 0 and "extra_head.weight" in result.output and "nothing was imported" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    lacking = {k: v for k, v in tensors.items() if "transformer_blocks.3.attn.to_k" not in k}
    save_file(lacking, str(tmp_path / "F5TTS_v1_lacking.safetensors"))
    result = _cli("import-f5", str(tmp_path / "F5TTS_v1_lacking.safetensors"), "--out", str(tmp_path / "b"))
    assert result.exit_code != 0 and "transformer_blocks.3.attn.to_k" in result.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no partial run left


def test_vocab_of_another_size_and_undecidable_config(tmp_path: Path) -> None:
    ckpt = write_f5_safetensors(tmp_path / "F5TTS_v1.safetensors")
    (tmp_path / "short.txt").write_text(" \na\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match="has 2 tokens but .* embeds 40"):
        import_f5(ckpt, tmp_path / "run", vocab_file=tmp_path / "short.txt")
    plain = ckpt.rename(tmp_path / "model_1200.safetensors")
    with pytest.raises(ConfigError, match="give --config F5TTS_v1_Base or --config F5TTS_Base"):
        import_f5(plain, tmp_path / "run")


def test_export_round_trip_is_bit_exact(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    ckpt = write_f5_safetensors(tmp_path / "F5TTS_v1.safetensors")
    import_f5(ckpt, tmp_path / "run")
    model_file, vocab_file = export_f5(tmp_path / "run", tmp_path / "export")
    original, exported = load_file(str(ckpt)), load_file(str(model_file))
    transformer = {k: v for k, v in original.items() if k.startswith("ema_model.transformer.")}
    assert set(exported) == set(transformer)
    assert all(torch.equal(exported[k], transformer[k]) for k in transformer)
    assert vocab_file.read_text(encoding="utf-8") == (tmp_path / "vocab.txt").read_text(encoding="utf-8")
    import_f5(model_file, tmp_path / "again", config="F5TTS_v1_Base")
    a = load_checkpoint(tmp_path / "run" / "checkpoints" / "step-00000000").state
    b = load_checkpoint(tmp_path / "again" / "checkpoints" / "step-00000000").state
    assert all(torch.equal(a["ema"]["shadow"][k], b["ema"]["shadow"][k]) for k in a["ema"]["shadow"])
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])


def test_export_matches_the_file_f5s_loader_accepted(tmp_path: Path) -> None:
    """tools/f5_fixtures.py check-export loaded this export with F5-TTS's own
    ``load_checkpoint`` (infer/utils_infer.py) into its CFM + DiT and compared the velocity;
    the export must stay byte-identical to that file."""
    record = json.loads((FIXTURES / "export_check.json").read_text())
    assert record["f5_load_checkpoint"] == "ok" and record["max_abs_velocity_difference"] <= 1e-4
    import hashlib

    ckpt = write_f5_safetensors(tmp_path / "F5TTS_v1.safetensors")
    import_f5(ckpt, tmp_path / "run")
    model_file, _ = export_f5(tmp_path / "run", tmp_path / "export")
    assert hashlib.sha256(model_file.read_bytes()).hexdigest() == record["sha256"]


def test_export_refuses_models_f5_cannot_hold(tmp_path: Path) -> None:
    from flowkit.interop.f5_run import _refusal

    ckpt = write_f5_safetensors(tmp_path / "F5TTS_v1.safetensors")
    import_f5(ckpt, tmp_path / "run")
    meta = load_checkpoint(tmp_path / "run" / "checkpoints" / "step-00000000").meta
    assert _refusal(meta) is None
    cases = {
        "aligned text path": {"text_path": "aligned", "arch": "flowkit"},
        "emotion-conditioned": {"dur_cond": "emotion"},
        "flowkit's own network": {"arch": "flowkit"},
        "global conditions": {"conditions": True},
    }
    for phrase, change in cases.items():
        assert phrase in _refusal(dict(meta, model_config=dict(meta["model_config"], **change)))
    # through the command: a flowkit-arch checkpoint is refused in one line
    from flowkit.checkpoints.files import save_checkpoint

    save_checkpoint(tmp_path / "own", 1, {"model": {}, "ema": {"shadow": {}}},
                    dict(meta, model_config=dict(meta["model_config"], text_path="aligned", arch="flowkit")))
    result = _cli("export-f5", str(tmp_path / "own" / "step-00000001"), "--out", str(tmp_path / "x"))
    assert result.exit_code != 0 and "cannot export to F5-TTS" in result.output and "aligned text path" in result.output


def test_synthesize_and_report_accept_the_imported_run(tmp_path: Path) -> None:
    ckpt = write_f5_safetensors(tmp_path / "F5TTS_v1.safetensors")
    import_f5(ckpt, tmp_path / "run")
    result = _cli("synthesize", str(tmp_path / "run"), "--text", "!#12", "--seconds", "0.5", "--steps", "2",
                  "--out", str(tmp_path / "a.wav"))
    assert result.exit_code == 0, result.output
    assert "euler, sway -1" in result.output  # F5's inference defaults came with the import
    import soundfile as sf

    audio, sr = sf.read(str(tmp_path / "a.wav"))
    assert sr == 24000 and abs(len(audio) / sr - 0.5) < 0.05
    result = _cli("report", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run" / "report.md").is_file()
