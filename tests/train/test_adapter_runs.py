"""Adapter runs (Trainer.adapter = @adapter.lora()) on the tiny store: init-from a base trains
the adapter alone, checkpoints hold the adapter and name their base, a resume continues
bit-identically, merging gives the adapted model's outputs, another base is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from state_compare import assert_same_tensors, final_state, records
from train_helpers import DEBUG_GIN, TINY, SignalAt, spanish_store, train
from typer.testing import CliRunner

from flowkit.adapters import files as adapter_files
from flowkit.checkpoints import files as checkpoint
from flowkit.cli.app import app
from flowkit.errors import CheckpointError, ConfigError
from flowkit.train import run

LORA = ("Trainer.adapter = @adapter.lora()", "adapter.lora.rank = 2")


def _adapt(store: Path, base: Path, out: Path, steps: int = 8) -> run.RunOutcome:
    return run.train([DEBUG_GIN], [*TINY, *LORA], data=[store], out=out, steps=steps, device="cpu", init_from=base)


@pytest.fixture(scope="module")
def base(tiny_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("base") / "run"
    assert train(tiny_store, out, steps=4).status == "completed"
    return out


@pytest.fixture(scope="module")
def adapted(tiny_store: Path, base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("adapted") / "run"
    assert _adapt(tiny_store, base, out).status == "completed"
    return out


def _newest(run_dir: Path) -> Path:
    path, _ = checkpoint.find_latest(run_dir / "checkpoints")
    assert path is not None
    return path


def test_checkpoints_hold_the_adapter_and_name_their_base(base: Path, adapted: Path) -> None:
    loaded = checkpoint.load_checkpoint(_newest(adapted))
    keys = set(loaded.state["model"])
    assert keys and all(".lora_A." in k or ".lora_B." in k for k in keys)
    assert set(loaded.state["ema"]["shadow"]) == keys
    record = loaded.meta["adapter"]
    parent = _newest(base)
    assert record["base"]["checkpoint"] == str(parent.resolve())
    assert (record["base"]["state_sha256"]
            == json.loads((parent / "manifest.json").read_text())["files"]["state.pt"]["sha256"])
    assert record["trainable_parameters"] == sum(v.numel() for v in loaded.state["model"].values())
    assert record["trainable_parameters"] < 0.1 * record["base_parameters"]
    size = (loaded.path / "state.pt").stat().st_size
    assert size < 0.25 * (parent / "state.pt").stat().st_size
    b = [v for k, v in loaded.state["model"].items() if ".lora_B." in k]
    assert any(v.abs().sum() > 0 for v in b)  # the adapter trained (B left zero)


def test_resume_continues_bit_identically(tiny_store: Path, base: Path, adapted: Path, tmp_path: Path,
                                          monkeypatch) -> None:
    out = tmp_path / "run"
    original = run._loggers
    with monkeypatch.context() as m:
        m.setattr(run, "_loggers", lambda settings: [*original(settings), SignalAt(3)])
        outcome = _adapt(tiny_store, base, out)
    assert outcome.status == "interrupted" and outcome.step == 3
    assert run.resume(out, device="cpu").status == "completed"
    assert_same_tensors(final_state(adapted), final_state(out))
    assert records(adapted) == records(out)


def test_merge_gives_the_adapted_model(adapted: Path, tmp_path: Path) -> None:
    from flowkit.adapters.lora import LoRA
    from flowkit.model.dit import DiTConfig

    adapter = checkpoint.load_checkpoint(_newest(adapted))
    merged_dir = adapter_files.merge_adapter(adapter.path, tmp_path / "merged")
    merged = checkpoint.load_checkpoint(merged_dir)
    assert merged.meta["merged_adapter"]["adapter_checkpoint"] == str(adapter.path.resolve())
    base = adapter_files.load_base(adapter)
    cfg = DiTConfig.from_dict(adapter.meta["model_config"])
    size = (int(adapter.meta["latent_dim"]), adapter.meta["vocab"], len(adapter.meta["languages"]))
    from flowkit.text.vocabs import rebuild_vocab

    n_ids = rebuild_vocab(size[1]).size
    # the base with the adapter's EMA weights loaded into LoRA layers, as trained
    model = cfg.build(size[0], n_ids, size[2])
    checkpoint.load_strict(model, adapter_files.base_weights(base), what="model", source=base.path)
    record = adapter.meta["adapter"]
    model = LoRA(rank=record["rank"], alpha=record["alpha"]).apply(model, seed=0)
    model.load_state_dict(adapter.state["ema"]["shadow"])
    assert_same_tensors(model.state_dict(), adapter.state["ema"]["shadow"])  # the load is exact
    plain = cfg.build(size[0], n_ids, size[2])
    plain.load_state_dict({**merged.state["model"], **merged.state["ema"]["shadow"]})
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name in record["modules"]:
            lora_layer, merged_layer = model.get_submodule(name), plain.get_submodule(name)
            x = torch.randn(2, 30, merged_layer.in_features, generator=gen)
            want, got = lora_layer(x), merged_layer(x)  # W x + s B (A x) against (W + s B A) x
            # the same sums in another order in float32: within 1e-6 of the outputs' scale
            assert float((got - want).abs().max() / want.abs().max()) < 1e-6, name
    assert any(not torch.equal(merged.state["ema"]["shadow"][f"{n}.weight"],
                               adapter_files.base_weights(base)[f"{n}.weight"]) for n in record["modules"])


def test_synthesis_loads_an_adapter_checkpoint(adapted: Path, tmp_path: Path) -> None:
    from flowkit.synth.inference import load_inference_model

    adapter = _newest(adapted)
    im = load_inference_model(adapter)
    merged = checkpoint.load_checkpoint(adapter_files.merge_adapter(adapter, tmp_path / "m"))
    expected = {**merged.state["model"], **merged.state["ema"]["shadow"]}
    assert_same_tensors({k: v for k, v in im.model.state_dict().items() if k in expected}, expected)


def test_another_base_is_refused(tiny_store: Path, adapted: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    train(tiny_store, other, "Trainer.seed = 5", steps=4)
    with pytest.raises(CheckpointError, match=r"is an adapter of .* holds other weights .*give the adapter's own base"):
        adapter_files.merge_adapter(_newest(adapted), tmp_path / "m", base=other)
    result = CliRunner().invoke(app, ["merge-adapter", str(_newest(adapted)), "--out", str(tmp_path / "m"),
                                      "--base", str(other)])
    assert result.exit_code == 4 and "holds other weights" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_an_adapter_needs_a_base_and_is_no_parent(tiny_store: Path, adapted: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"adapters train on a base"):
        run.train([DEBUG_GIN], [*TINY, *LORA], data=[tiny_store], out=tmp_path / "fresh", steps=2, device="cpu")
    with pytest.raises(CheckpointError, match=r"holds adapter weights only; merge it onto its base first"):
        run.train([DEBUG_GIN], list(TINY), data=[tiny_store], out=tmp_path / "child", steps=2, device="cpu",
                  init_from=adapted)


def test_a_new_language_grows_languages_and_embedding_rows(base: Path, tmp_path: Path) -> None:
    from flowkit.synth.inference import load_inference_model
    from flowkit.train.vocab_growth import LANGUAGE_EMBEDDINGS

    store = spanish_store(tmp_path / "es.zarr")
    out = tmp_path / "es-lora"
    assert _adapt(store, base, out, steps=2).status == "completed"
    adapter = checkpoint.load_checkpoint(_newest(out))
    assert adapter.meta["languages"] == ["en", "es"]
    rows = adapter.meta["adapter"]["new_rows"]
    assert rows is not None and rows[1] > rows[0]
    assert "text.embed.new_rows" in adapter.state["model"]
    info = json.loads((out / "run_info.json").read_text())
    assert info["init_from"]["added_languages"]["languages"] == ["es"]
    im = load_inference_model(adapter.path)  # merged onto the base: the grown tables fit the model
    assert im.languages == ("en", "es") and im.language_id("es") == 2
    state = im.model.state_dict()
    parent = adapter_files.base_weights(adapter_files.load_base(adapter))
    for key in LANGUAGE_EMBEDDINGS:
        if key in parent:  # the new language's row starts as the unknown language's (frozen under LoRA)
            assert torch.equal(state[key][:2], parent[key]) and torch.equal(state[key][2], parent[key][0])
    assert torch.equal(state["text.embed.weight"][: rows[0]], parent["text.embed.weight"])
