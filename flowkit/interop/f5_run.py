"""``flowkit import-f5`` and ``flowkit export-f5``: F5-TTS files <-> a flowkit run.

An import writes a run directory with one checkpoint (step 0) that ``init-from``,
``synthesize`` and ``report`` accept: the model weights (F5's raw weights from a training
``.pt``, its EMA weights otherwise), the EMA weights, F5's vocabulary as the ``text.f5``
state, ``encoder.vocos_mel`` as the encoder record, latent statistics of mean 0 and std 1
(the model sees F5's raw log-mel), F5's inference defaults as the run's solver (32
Euler steps with sway -1, ``gin/f5_infer.gin``) and an ``imported_from`` record (file,
size, sha256, F5 config). The run appears whole or not at all: it is written beside its
final path and renamed.

An export writes F5-TTS's released layout: ``model.safetensors`` with the EMA weights
under ``ema_model.transformer.*`` and the ``vocab.txt`` its tokenizer reads, which F5's
``load_checkpoint`` (``infer/utils_infer.py``) loads with ``use_ema=True``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import torch

from flowkit import hub
from flowkit.errors import CheckpointError, ConfigError
from flowkit.interop.f5 import (
    F5_CONFIGS,
    check_finite,
    describe_source,
    f5_names_of,
    f5_state_from_flowkit,
    flowkit_state_from_f5,
    model_config_from_f5_state,
    read_f5_checkpoint,
    weight_dtypes,
)
from flowkit.io import file_sha256, missing_dirs, remove_dirs

__all__ = ["EXPORT_RECORD", "F5_INFER_CONFIG", "export_f5", "import_f5", "imported_record"]

#: The config text an imported run records (gin/f5_infer.gin's bindings): synthesis from
#: it uses F5-TTS's solver defaults.
F5_INFER_CONFIG = "Trainer.solver = @solver.euler()\nsolver.euler.sway = -1.0\n"
PREFIX = "ema_model.transformer."
#: Written by export-f5 beside model.safetensors (F5-TTS reads only the model file and
#: vocab.txt): the F5 configuration and the file's sha256, so import-f5 needs no --config.
EXPORT_RECORD = "flowkit_export.json"


def _arch(config: str, path: Path, sha256: str) -> str:
    if config in F5_CONFIGS:
        return F5_CONFIGS[config]
    if config != "auto":
        raise ConfigError(f"--config {config!r} is not known; use one of: {', '.join(F5_CONFIGS)}, auto")
    recorded = _export_record(path, sha256)
    if recorded is not None:
        return F5_CONFIGS[recorded]
    name = path.name.lower() + " " + path.parent.name.lower()
    if "v1" in name:
        return "f5_v1"
    if "f5tts_base" in name:
        return "f5_base"
    raise ConfigError(
        f"{path}: cannot tell F5TTS_v1_Base from F5TTS_Base by the file name (their weights have the same "
        "shapes); give --config F5TTS_v1_Base or --config F5TTS_Base"
    )


def _export_record(path: Path, sha256: str) -> str | None:
    """The F5 config that ``flowkit export-f5`` recorded for this very file, or None."""
    try:
        record = json.loads((path.parent / EXPORT_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("model_sha256") != sha256:
        return None  # another file now sits in the export's place
    return record.get("f5_config") if record.get("f5_config") in F5_CONFIGS else None


def _check_shapes(f5: dict[str, torch.Tensor], model: torch.nn.Module, cfg: Any, *, source: str, what: str) -> None:
    """Every F5 weight has the shape an F5 DiT of the sizes read from the file needs; the
    first that does not is named by its F5 key and flowkit's.

    Raises:
        CheckpointError: the weights disagree with each other (a damaged or spliced file).
    """
    sizes = cfg.sizes()
    head_dim = sizes["dim"] // sizes["heads"]
    state = model.state_dict()
    expected = f5_state_from_flowkit(state, head_dim)
    names = f5_names_of(state, head_dim)
    for key in sorted(expected):
        if key in f5 and key in names and tuple(f5[key].shape) != tuple(expected[key].shape):
            raise CheckpointError(
                f"{source}: {what} weight {key} has shape {tuple(f5[key].shape)}, but an F5-TTS DiT of dim "
                f"{sizes['dim']}, depth {sizes['depth']}, {sizes['heads']} heads (the sizes the file's other "
                f"weights give) needs {tuple(expected[key].shape)} there (flowkit's {names[key]}); the file is "
                "damaged or mixes two models: nothing was imported"
            )


def imported_record(checkpoint: str | Path) -> dict[str, Any]:
    """The ``imported_from`` record (file, sha256, config, dtype, ...) of a checkpoint that
    `import_f5` wrote; {} for any other checkpoint."""
    try:
        meta = json.loads((Path(checkpoint) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta.get("imported_from") or {}


def _vocab(vocab_file: Path | None, checkpoint: Path, rows: int):
    from flowkit.text.f5 import F5Vocab, read_vocab_file

    path = vocab_file or checkpoint.parent / "vocab.txt"
    if not path.is_file():
        raise ConfigError(
            f"no vocabulary: {path} does not exist; give --vocab with F5-TTS's vocab.txt "
            "(src/f5_tts/infer/examples/vocab.txt for the released models)"
        )
    vocab = F5Vocab(read_vocab_file(path))
    if vocab.size != rows:
        raise CheckpointError(
            f"{path} has {len(vocab.tokens)} tokens but {checkpoint} embeds {rows - 1} (+1 filler row); "
            "give the vocab.txt the model was trained with"
        )
    return vocab


def import_f5(
    checkpoint: str | Path, out: str | Path, *, vocab_file: str | Path | None = None, config: str = "auto"
) -> Path:
    """Import an F5-TTS ``.safetensors`` or training ``.pt`` as a run directory ``out``.

    Returns:
        The checkpoint directory written (``out/checkpoints/step-00000000``).

    Raises:
        ConfigError: ``out`` exists and is not empty, an unknown ``config`` (or "auto" that
            cannot decide), no vocabulary file.
        CheckpointError: an unreadable file, keys F5's DiT does not have or lacks (named),
            a vocabulary of another size, shapes that do not fit.
    """
    from flowkit.checkpoints import files as ckpt
    from flowkit.data.encoders import VocosMel
    from flowkit.model.dit import DiTConfig
    from flowkit.train.ema import EMA

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not empty; give a new run directory")
    if vocab_file is None and hub.is_hub(checkpoint):  # F5-TTS keeps vocab.txt beside the weights
        ref = hub.parse(checkpoint)
        sibling = attrs.evolve(ref, path="/".join([*ref.path.split("/")[:-1], "vocab.txt"]))
        try:
            vocab_file = hub.resolve(str(sibling))
        except CheckpointError:
            vocab_file = None  # _vocab says what to give
    checkpoint = hub.resolve(checkpoint)  # hf://OWNER/REPO/PATH: the cached file
    if vocab_file is not None:
        vocab_file = hub.resolve(vocab_file)
    source = str(checkpoint)
    ema_f5 = read_f5_checkpoint(checkpoint, weights="ema")
    raw_f5 = ema_f5
    if checkpoint.suffix != ".safetensors":
        raw_f5 = read_f5_checkpoint(checkpoint, weights="raw")
    dtype = weight_dtypes(ema_f5)  # float16 / bfloat16 files are upcast to float32
    check_finite(ema_f5, source=source, what="EMA")
    if raw_f5 is not ema_f5:
        check_finite(raw_f5, source=source, what="model")
    sha256 = file_sha256(checkpoint)
    arch = _arch(config, checkpoint, sha256)
    cfg = DiTConfig.from_dict(model_config_from_f5_state(ema_f5, arch, source=source))
    vocab = _vocab(Path(vocab_file) if vocab_file else None, checkpoint,
                   int(ema_f5["text_embed.text_embed.weight"].shape[0]))
    model = cfg.build(100, vocab.size, 0)
    expected = set(f5_state_from_flowkit(model.state_dict(), cfg.sizes()["dim"] // cfg.sizes()["heads"]))
    for what, f5 in (("EMA", ema_f5), ("model", raw_f5)):
        missing = sorted(expected - set(f5))
        if missing:
            raise CheckpointError(
                f"{source}: {what} weights lack {len(missing)} key(s) of F5-TTS's DiT: {', '.join(missing[:6])}; "
                "nothing was imported"
            )
        _check_shapes(f5, model, cfg, source=source, what=what)
    raw_state = flowkit_state_from_f5(raw_f5, source=source)
    ema_state = flowkit_state_from_f5(ema_f5, source=source)
    ckpt.load_strict(model, raw_state, what="model", source=checkpoint)
    ema = EMA(model, decay=0.9999)
    ema_model = cfg.build(100, vocab.size, 0)
    ckpt.load_strict(ema_model, ema_state, what="EMA", source=checkpoint)
    shadow = {k: v.detach().float().clone() for k, v in ema_model.state_dict().items() if k in ema.shadow}
    step = _f5_step(checkpoint)
    encoder = {"name": "vocos_mel", "params": VocosMel().params()}
    stats = {"mean": [0.0] * 100, "std": [1.0] * 100, "n_frames": 0}
    imported = describe_source(checkpoint, arch, "ema" if checkpoint.suffix == ".safetensors" else "raw and ema",
                               sha256=sha256, dtype=dtype)
    meta = {
        "config_text": F5_INFER_CONFIG, "seed": 0, "latent_stats": stats, "vocab": vocab.state_dict(),
        "languages": [], "model_config": cfg.to_dict(), "data_fingerprint": None, "stores": [],
        "latent_dim": 100, "frame_rate": VocosMel().frame_rate, "sample_rate": VocosMel().sample_rate,
        "init_from": None, "world_size": 1, "encoder": encoder, "imported_from": imported,
    }
    partial = out.parent / f".{out.name}.import-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    created = missing_dirs(out.parent)
    try:
        partial.mkdir(parents=True)
        state = {"model": model.state_dict(), "ema": {"num_updates": step, "shadow": shadow}}
        written = ckpt.save_checkpoint(partial / "checkpoints", 0, state, meta)
        (partial / "config.gin").write_text("# imported from F5-TTS: flowkit import-f5\n" + F5_INFER_CONFIG,
                                            encoding="utf-8")
        (partial / "latent_stats.json").write_text(json.dumps(stats) + "\n", encoding="utf-8")
        (partial / "metrics.jsonl").write_text("", encoding="utf-8")
        run_info = {"config": F5_INFER_CONFIG, "imported_from": imported, "seed": 0, "stores": [],
                    "init_from": None, "num_parameters": sum(p.numel() for p in model.parameters()), "world_size": 1}
        (partial / "run_info.json").write_text(json.dumps(run_info, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        remove_dirs(created)
        raise
    return out / "checkpoints" / written.name


def _f5_step(checkpoint: Path) -> int:
    """F5's EMA step where the file records one (ema_pytorch's ``step`` buffer), else 0."""
    try:
        if checkpoint.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(checkpoint), "pt") as f:
                return int(f.get_tensor("ema_model.step")) if "ema_model.step" in f.keys() else 0
        raw = torch.load(checkpoint, map_location="cpu", weights_only=True)
        step = raw["ema_model_state_dict"].get("step")
        return int(step) if step is not None else 0
    except Exception:  # the weights were read already; a missing counter is not an error
        return 0


def _refusal(meta: dict[str, Any]) -> str | None:
    """Why F5-TTS cannot hold this model, or None."""
    cfg = meta.get("model_config") or {}
    if cfg.get("text_path") == "aligned":
        return "it uses the aligned text path (unit timings and a duration head), which F5-TTS's DiT does not have"
    if cfg.get("dur_cond", "none") != "none":
        return "its duration head is emotion-conditioned (dur_cond = 'emotion'), which F5-TTS does not have"
    if cfg.get("arch", "flowkit") == "flowkit":
        return "it is flowkit's own network (model.dit.arch = 'flowkit'); only f5_v1 / f5_base models export"
    if cfg.get("conditions", True):
        return ("it carries flowkit's global conditions (language, emotion, rate, loudness), "
                "which F5-TTS has no input for")
    if (meta.get("vocab") or {}).get("kind") != "f5":
        return "its text front end is not text.f5, so F5-TTS's tokenizer would read other ids"
    if int(meta.get("latent_dim") or 0) != 100:
        return f"its latents have {meta.get('latent_dim')} channels; F5-TTS's vocos models take 100"
    stats = meta.get("latent_stats") or {}
    if not (np.allclose(stats.get("mean", [1.0]), 0.0) and np.allclose(stats.get("std", [0.0]), 1.0)):
        return "its latent statistics are not mean 0 / std 1, while F5-TTS feeds raw log-mel"
    return None


def export_f5(checkpoint: str | Path, out: str | Path) -> tuple[Path, Path]:
    """Write ``out/model.safetensors`` (EMA weights, F5's released keys), ``out/vocab.txt``
    and ``out/flowkit_export.json`` (`EXPORT_RECORD`: the F5 config, which import-f5 reads).

    ``checkpoint`` is a checkpoint directory or a run directory (its best, else newest).
    ``out`` must be new or empty; the folder is written beside it and renamed into place,
    so it appears whole or not at all.

    Returns:
        ``(model.safetensors, vocab.txt)``.

    Raises:
        CheckpointError: no valid checkpoint.
        ConfigError: ``out`` holds files already; a model F5-TTS cannot hold (the reason
            named: aligned path, emotion durations, flowkit's arch, global conditions,
            another text front end, other latents), or an encoder other than vocos_mel.
    """
    import hashlib

    from safetensors.torch import save as save_safetensors

    from flowkit import __version__
    from flowkit.checkpoints import files as ckpt
    from flowkit.io import fsync_dir
    from flowkit.synth.inference import resolve_checkpoint, store_encoder
    from flowkit.text.f5 import F5Vocab

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out} exists and is not empty; give a new folder (export-f5 writes "
                          f"model.safetensors, vocab.txt and {EXPORT_RECORD} there, beside nothing else)")
    loaded = ckpt.load_checkpoint(resolve_checkpoint(checkpoint))
    meta = loaded.meta
    why = _refusal(meta)
    if why is None:
        encoder = meta.get("encoder") or store_encoder(meta.get("stores") or (), {"name": "unknown"})
        if encoder.get("name") != "vocos_mel":
            why = f"its latents come from encoder.{encoder.get('name')}, while F5-TTS reads encoder.vocos_mel features"
    if why is not None:
        raise ConfigError(f"{loaded.path}: cannot export to F5-TTS: {why}")
    sizes = meta["model_config"]
    head_dim = int(sizes["dim"]) // int(sizes["heads"])
    state = dict(loaded.state["model"])
    state.update({k: v for k, v in loaded.state["ema"]["shadow"].items() if k in state})
    f5 = f5_state_from_flowkit(state, head_dim)
    tensors = {PREFIX + k: v for k, v in f5.items()}
    model_bytes = save_safetensors(tensors)
    vocab = F5Vocab.from_state_dict(meta["vocab"])
    config = next(k for k, v in F5_CONFIGS.items() if v == sizes.get("arch"))
    record = {"format": "flowkit export-f5", "f5_config": config, "model_file": "model.safetensors",
              "model_sha256": hashlib.sha256(model_bytes).hexdigest(), "source": str(loaded.path.resolve()),
              "step": loaded.step, "flowkit": __version__}
    files = {"model.safetensors": model_bytes,
             "vocab.txt": "".join(f"{t}\n" for t in vocab.tokens).encode("utf-8"),
             EXPORT_RECORD: (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8")}
    partial = out.parent / f".{out.name}.export-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    created = missing_dirs(out.parent)
    try:
        partial.mkdir(parents=True)
        for name, data in files.items():
            with (partial / name).open("wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        fsync_dir(partial)
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(partial, out)
        fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        remove_dirs(created)
        raise
    return out / "model.safetensors", out / "vocab.txt"
