"""F5-TTS checkpoints in flowkit: key mapping, import, export and F5's forward.

Shape legend: b batch, n frames, d mel channels (100), nt text tokens.

F5-TTS (SWivid/F5-TTS; Chen et al. 2024) releases its models as ``.safetensors`` holding
the EMA weights under ``ema_model.transformer.*`` (plus ``ema_model.initted`` and
``ema_model.step``), and its trainer writes ``.pt`` files with ``model_state_dict``
(``transformer.*``), ``ema_model_state_dict`` (``ema_model.transformer.*``),
``optimizer_state_dict``, ``scheduler_state_dict`` and ``update``. Both load into a
flowkit `DiT` built with ``arch = "f5_v1"`` / ``"f5_base"`` and ``conditions = False``
(`flowkit.interop.f5_network.F5DiT`), whose parameters map one to one (q, k and v are fused, the
final modulation stores shift before scale, the GRN gains are flat).

Token ids: F5 numbers its ``vocab.txt`` lines from 0 and pads batches with -1; its
embedding adds 1 so row 0 is a filler. flowkit's ids are F5's plus one (0 = padding, the
same row), see `flowkit.text.f5`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from flowkit.errors import CheckpointError, ConfigError
from flowkit.io import file_sha256

__all__ = [
    "F5_CONFIGS",
    "F5Velocity",
    "check_finite",
    "f5_names_of",
    "f5_state_from_flowkit",
    "flowkit_state_from_f5",
    "load",
    "model_config_from_f5_state",
    "read_f5_checkpoint",
    "weight_dtypes",
]

#: F5-TTS's configurations (its ``configs/*.yaml``) and the flowkit arch that holds each.
F5_CONFIGS = {"F5TTS_v1_Base": "f5_v1", "F5TTS_Base": "f5_base"}
_BLOCK = re.compile(r"^transformer_blocks\.(\d+)\.(.+)$")
_TEXT_BLOCK = re.compile(r"^text_embed\.text_blocks\.(\d+)\.(.+)$")

# ---- key mapping ---------------------------------------------------------------------------

#: F5 name (inside one DiT block) -> flowkit name; q/k/v are handled apart (fused).
_BLOCK_NAMES = {
    "attn_norm.linear.weight": "modulation.weight", "attn_norm.linear.bias": "modulation.bias",
    "attn.to_out.0.weight": "attn.out.weight", "attn.to_out.0.bias": "attn.out.bias",
    "ff.ff.0.0.weight": "ff.0.weight", "ff.ff.0.0.bias": "ff.0.bias",
    "ff.ff.2.weight": "ff.3.weight", "ff.ff.2.bias": "ff.3.bias",
}
_TEXT_BLOCK_NAMES = {
    "dwconv.weight": "dwconv.weight", "dwconv.bias": "dwconv.bias",
    "norm.weight": "norm.weight", "norm.bias": "norm.bias",
    "pwconv1.weight": "up.weight", "pwconv1.bias": "up.bias",
    "pwconv2.weight": "down.weight", "pwconv2.bias": "down.bias",
    "grn.gamma": "grn.gamma", "grn.beta": "grn.beta",
}
_PLAIN_NAMES = {
    "time_embed.time_mlp.0.weight": "time.mlp.0.weight", "time_embed.time_mlp.0.bias": "time.mlp.0.bias",
    "time_embed.time_mlp.2.weight": "time.mlp.2.weight", "time_embed.time_mlp.2.bias": "time.mlp.2.bias",
    "text_embed.text_embed.weight": "text.embed.weight",
    "input_embed.proj.weight": "input_proj.weight", "input_embed.proj.bias": "input_proj.bias",
    "input_embed.conv_pos_embed.conv1d.0.weight": "conv_pos.conv1.weight",
    "input_embed.conv_pos_embed.conv1d.0.bias": "conv_pos.conv1.bias",
    "input_embed.conv_pos_embed.conv1d.2.weight": "conv_pos.conv2.weight",
    "input_embed.conv_pos_embed.conv1d.2.bias": "conv_pos.conv2.bias",
    "long_skip_connection.weight": "long_skip.weight",
    "proj_out.weight": "final.proj.weight", "proj_out.bias": "final.proj.bias",
}
_SWAPPED = {"norm_out.linear.weight": "final.modulation.weight", "norm_out.linear.bias": "final.modulation.bias"}
_ROTARY = "rotary_embed.inv_freq"


def _swap_halves(t: torch.Tensor) -> torch.Tensor:
    """F5's final modulation is (scale, shift), flowkit's (shift, scale): swap the halves."""
    a, b = t.chunk(2, dim=0)
    return torch.cat([b, a], dim=0)


def _inv_freq(head_dim: int) -> torch.Tensor:
    return 1.0 / (10_000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))


def flowkit_state_from_f5(f5: Mapping[str, torch.Tensor], *, source: str) -> dict[str, torch.Tensor]:
    """A flowkit DiT state dict from an F5 DiT state dict (keys without ``transformer.``).

    Every F5 key is used and every flowkit key produced (except the global conditions,
    which an F5 model lacks); nothing is copied until every key is known. Half-precision
    weights (float16, bfloat16) are upcast to float32.

    Raises:
        CheckpointError: unknown keys, missing q/k/v parts, or a rotary table other than
            F5's (base 10^4), each named in one line.
    """
    out: dict[str, torch.Tensor] = {}
    unknown: list[str] = []
    qkv: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in f5.items():
        value = value.detach()
        if key == _ROTARY:
            expected = _inv_freq(2 * value.numel())
            # a table stored in half precision is F5's rounded to that precision: within one
            # epsilon of the dtype (float16 9.8e-4, bfloat16 7.8e-3; float32 1e-6 as before)
            rtol = max(1e-6, torch.finfo(value.dtype).eps) if value.is_floating_point() else 0.0
            if value.shape != expected.shape or not torch.allclose(value.float(), expected, rtol=rtol, atol=0):
                raise CheckpointError(f"{source}: {key} is not F5-TTS's rotary table (base 10000); cannot import it")
            continue
        if value.is_floating_point() and value.dtype != torch.float32:
            value = value.float()  # flowkit's model is float32; half-precision files are upcast
        if key in _PLAIN_NAMES:
            out[_PLAIN_NAMES[key]] = value
        elif key in _SWAPPED:
            out[_SWAPPED[key]] = _swap_halves(value)
        elif m := _BLOCK.match(key):
            i, rest = int(m.group(1)), m.group(2)
            if rest in _BLOCK_NAMES:
                out[f"blocks.{i}.{_BLOCK_NAMES[rest]}"] = value
            elif rest.startswith(("attn.to_q.", "attn.to_k.", "attn.to_v.")):
                qkv.setdefault(i, {})[rest[len("attn.to_"):]] = value
            else:
                unknown.append(key)
        elif m := _TEXT_BLOCK.match(key):
            i, rest = int(m.group(1)), m.group(2)
            if rest not in _TEXT_BLOCK_NAMES:
                unknown.append(key)
                continue
            if rest.startswith("grn."):
                value = value.reshape(-1)
            out[f"text.blocks.{i}.{_TEXT_BLOCK_NAMES[rest]}"] = value
        else:
            unknown.append(key)
    if unknown:
        raise CheckpointError(
            f"{source}: {len(unknown)} key(s) F5-TTS's DiT does not have: {', '.join(sorted(unknown)[:6])}"
            " (is it an E2-TTS, MMDiT or UNetT checkpoint?); nothing was imported"
        )
    for i, parts in sorted(qkv.items()):
        for kind in ("weight", "bias"):
            names = [f"{p}.{kind}" for p in ("q", "k", "v")]
            lacking = [n for n in names if n not in parts]
            if lacking:
                raise CheckpointError(
                    f"{source}: transformer_blocks.{i}.attn.to_{lacking[0]} is missing; nothing was imported"
                )
            out[f"blocks.{i}.attn.qkv.{kind}"] = torch.cat([parts[n] for n in names], dim=0)
    return out


def f5_state_from_flowkit(state: Mapping[str, torch.Tensor], head_dim: int) -> dict[str, torch.Tensor]:
    """The inverse of `flowkit_state_from_f5`: F5 DiT keys (without ``transformer.``),
    F5's rotary table included. Tensors are cloned, contiguous, in their own dtype.

    Raises:
        CheckpointError: a flowkit key that F5-TTS's DiT has no place for (names it).
    """
    plain = {v: k for k, v in _PLAIN_NAMES.items()}
    swapped = {v: k for k, v in _SWAPPED.items()}
    block_names = {v: k for k, v in _BLOCK_NAMES.items()}
    text_names = {v: k for k, v in _TEXT_BLOCK_NAMES.items()}
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        value = value.detach()
        if key in plain:
            out[plain[key]] = value
        elif key in swapped:
            out[swapped[key]] = _swap_halves(value)
        elif m := re.match(r"^blocks\.(\d+)\.(.+)$", key):
            i, rest = int(m.group(1)), m.group(2)
            if rest.startswith("attn.qkv."):
                kind = rest.rsplit(".", 1)[1]
                for part, chunk in zip(("q", "k", "v"), value.chunk(3, dim=0), strict=True):
                    out[f"transformer_blocks.{i}.attn.to_{part}.{kind}"] = chunk
            elif rest in block_names:
                out[f"transformer_blocks.{i}.{block_names[rest]}"] = value
            else:
                raise CheckpointError(f"flowkit weight {key} has no place in F5-TTS's DiT")
        elif m := re.match(r"^text\.blocks\.(\d+)\.(.+)$", key):
            i, rest = int(m.group(1)), m.group(2)
            if rest not in text_names:
                raise CheckpointError(f"flowkit weight {key} has no place in F5-TTS's DiT")
            if rest.startswith("grn."):
                value = value.reshape(1, 1, -1)
            out[f"text_embed.text_blocks.{i}.{text_names[rest]}"] = value
        else:
            raise CheckpointError(f"flowkit weight {key} has no place in F5-TTS's DiT")
    out[_ROTARY] = _inv_freq(head_dim)
    return {k: v.contiguous().clone() for k, v in sorted(out.items())}


# ---- reading F5's files --------------------------------------------------------------------


def read_f5_checkpoint(path: str | Path, *, weights: str = "ema") -> dict[str, torch.Tensor]:
    """F5 DiT weights (keys without ``transformer.``) of a released ``.safetensors`` or a
    training ``.pt``.

    Args:
        weights: "ema" (what F5's inference loads; a ``.safetensors`` holds only these) or
            "raw" (``model_state_dict`` of a training ``.pt``).

    Raises:
        CheckpointError: an unreadable file, a ``.pt`` without the state dict asked for, or
            weights outside ``transformer.`` (named).
    """
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(_folder_given(path))
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file; give F5-TTS's model_*.safetensors or model_*.pt")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            raw: Mapping[str, Any] = {"ema_model_state_dict": load_file(str(path))}
        else:
            raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # safetensors and torch raise several types for a bad file
        raise CheckpointError(f"{path}: cannot read it as an F5-TTS checkpoint ({_read_failure(exc)})") from None
    if weights == "ema":
        key, prefix = "ema_model_state_dict", "ema_model.transformer."
        skip = {"initted", "step", "ema_model.initted", "ema_model.step"}
    elif weights == "raw":
        key, prefix, skip = "model_state_dict", "transformer.", set()
    else:
        raise ConfigError(f"weights = {weights!r}; use 'ema' or 'raw'")
    if not isinstance(raw, Mapping) or key not in raw:
        have = sorted(raw)[:6] if isinstance(raw, Mapping) else type(raw).__name__
        raise CheckpointError(f"{path}: no {key} in the file (it holds {have}); is it an F5-TTS checkpoint?")
    state = raw[key]
    outside = sorted(k for k in state if k not in skip and not k.startswith(prefix))
    # F5 once saved its mel front end's buffers; its own loader drops them too.
    outside = [k for k in outside
               if not k.endswith(("mel_spec.mel_stft.mel_scale.fb", "mel_spec.mel_stft.spectrogram.window"))]
    if outside:
        raise CheckpointError(
            f"{path}: {len(outside)} {key} key(s) outside {prefix}*: {', '.join(outside[:6])}; nothing was imported"
        )
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def _folder_given(path: Path) -> str:
    """What to give instead of the folder ``path``: the checkpoint files inside it, named."""
    if (path / "checkpoints").is_dir() or (path / "meta.json").is_file():
        return (f"{path} is a flowkit run or checkpoint, not an F5-TTS file: use it as it is "
                "(init-from, synthesize), or `flowkit export-f5` it")
    inside = sorted(p.name for p in path.iterdir() if p.suffix in (".safetensors", ".pt") and p.is_file())
    if inside:
        return (f"{path} is a folder; give the checkpoint file inside it, e.g. {path / inside[-1]}"
                + (f" ({len(inside)} there: {', '.join(inside[:4])})" if len(inside) > 1 else ""))
    return f"{path} is a folder with no .safetensors or .pt file; give F5-TTS's model_*.safetensors or model_*.pt"


def _read_failure(exc: Exception) -> str:
    """Why a file could not be read, in one line: torch's advice on weights_only (which
    would run the file's code) is left out; what the file holds beyond tensors is named."""
    text = str(exc)
    if "Weights only load failed" in text:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
        what = found.group(1) if found else "Python objects"
        return (f"it holds {what}, not only tensors and numbers, and flowkit does not unpickle code; "
                "F5-TTS's own checkpoints hold tensors only")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}"


def f5_names_of(state: Mapping[str, torch.Tensor], head_dim: int) -> dict[str, str]:
    """F5 key -> the flowkit key it maps to, for the flowkit DiT ``state`` (F5's q, k and v
    of a block all map to flowkit's fused ``qkv``)."""
    names = {}
    for key, value in state.items():
        for f5_key in f5_state_from_flowkit({key: value}, head_dim):
            if f5_key != _ROTARY:
                names[f5_key] = key
    return names


def weight_dtypes(f5: Mapping[str, torch.Tensor]) -> str:
    """The floating dtypes of F5 weights, e.g. ``"float16"`` (or ``"bfloat16, float32"``)."""
    kinds = sorted({str(v.dtype).removeprefix("torch.") for v in f5.values() if v.is_floating_point()})
    return ", ".join(kinds) or "none"


def check_finite(f5: Mapping[str, torch.Tensor], *, source: str, what: str) -> None:
    """Refuse weights holding NaN or infinity (a diverged or damaged file), naming the key.

    Raises:
        CheckpointError: the first such key (sorted), with its NaN and infinity counts.
    """
    for key in sorted(f5):
        value = f5[key]
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            nan = int(torch.isnan(value).sum())
            inf = int(torch.isinf(value).sum())
            raise CheckpointError(
                f"{source}: {what} weight {key} holds {nan} NaN and {inf} infinite value(s) of {value.numel()}; "
                "the file is damaged or comes from a diverged run: nothing was imported"
            )


def model_config_from_f5_state(f5: Mapping[str, torch.Tensor], arch: str, *, source: str) -> dict[str, Any]:
    """flowkit model config (`DiTConfig.to_dict` fields) for F5 DiT weights of ``arch``.

    Sizes are read from the weights (head width from the rotary table); the F5
    configurations keep dropout 0.1 and the convolutional position kernel 31.

    Raises:
        CheckpointError: a weight the sizes need is missing, or mel channels other than 100.
    """
    try:
        dim = int(f5["time_embed.time_mlp.0.weight"].shape[0])
        depth = 1 + max(int(m.group(1)) for k in f5 if (m := _BLOCK.match(k)))
        head_dim = 2 * int(f5[_ROTARY].numel())
        ff = int(f5["transformer_blocks.0.ff.ff.0.0.weight"].shape[0])
        text_dim = int(f5["text_embed.text_embed.weight"].shape[1])
        conv_layers = len({m.group(1) for k in f5 if (m := _TEXT_BLOCK.match(k))})
        kernel = int(f5["input_embed.conv_pos_embed.conv1d.0.weight"].shape[-1])
        mel = int(f5["proj_out.weight"].shape[0])
    except (KeyError, ValueError) as exc:
        raise CheckpointError(f"{source}: F5-TTS weight {exc} is missing; nothing was imported") from None
    if mel != 100:
        raise CheckpointError(f"{source}: {mel} mel channels; flowkit imports F5-TTS's 100-bin vocos models only")
    return {"preset": "f5_base", "dim": dim, "depth": depth, "heads": dim // head_dim, "ff_mult": ff // dim,
            "text_dim": text_dim, "conv_layers": conv_layers, "dur_hidden": 256, "dropout": 0.1,
            "text_path": "unaligned", "dur_cond": "none", "conv_pos_kernel": kernel, "arch": arch,
            "conditions": False, "long_skip": "long_skip_connection.weight" in f5}


# ---- F5's forward --------------------------------------------------------------------------


class F5Velocity(nn.Module):
    """F5-TTS ``DiT.forward`` over a flowkit `DiT` of an F5 arch (same weights, same velocity).

    F5's padding rule is kept: with a ``mask``, attention still sees the padded frames
    (F5's configs leave ``attn_mask_enabled`` off) while their attention output, text and
    convolutional position features are zero. flowkit's own ``DiT.forward`` masks padded
    keys instead, so it equals this one on unpadded items and keeps items independent.
    """

    def __init__(self, dit: nn.Module) -> None:
        super().__init__()
        if getattr(dit.cfg, "arch", "flowkit") == "flowkit":
            raise ConfigError("F5Velocity needs a model of model.dit.arch 'f5_v1' or 'f5_base'")
        if dit.globals is not None:
            raise ConfigError(
                "this model carries flowkit's global conditions (model.dit.conditions = True), "
                "which F5-TTS's forward has no input for"
            )
        self.dit = dit

    def forward(
        self,
        x: torch.Tensor,
        cond: torch.Tensor,
        text: torch.Tensor,
        time: torch.Tensor,
        mask: torch.Tensor | None = None,
        drop_audio_cond: bool = False,
        drop_text: bool = False,
    ) -> torch.Tensor:
        """Velocity ``[b n d]`` of noisy mel ``x [b n d]`` given the masked mel ``cond
        [b n d]``, F5 token ids ``text [b nt]`` (-1 padding), flow time ``time [b]`` or
        ``[]`` in [0, 1] and an optional frame ``mask [b n]`` (bool, prefixes)."""
        dit = self.dit
        b, n = x.shape[:2]
        if time.ndim == 0:
            time = time.repeat(b)
        valid = mask if mask is not None else torch.ones(b, n, dtype=torch.bool, device=x.device)
        seq_len = valid.sum(dim=1)
        ids = (text.long() + 1)[:, :n]
        ids = torch.nn.functional.pad(ids, (0, n - ids.shape[1]), value=0)
        within = torch.arange(n, device=x.device)[None, :] < seq_len[:, None]
        ids = ids.masked_fill(~within, 0)
        text_feat = dit.text(ids, within, torch.full((b,), bool(drop_text), device=x.device))
        if drop_audio_cond:
            cond = torch.zeros_like(cond)
        h = dit.input_proj(torch.cat([x, cond, text_feat.to(x.dtype)], dim=-1))
        if dit.conv_pos is not None:
            h = dit.conv_pos(h, valid)
        c = dit.time(time.to(x.device))
        rope = dit.rotary(n, x.device)
        skip = h
        for block in dit.blocks:
            shift1, scale1, gate1, shift2, scale2, gate2 = block.modulation(
                torch.nn.functional.silu(c))[:, None, :].chunk(6, dim=-1)
            attn = block.attn(block.attn_norm(h) * (1 + scale1) + shift1, rope)  # every key: F5's rule
            if mask is not None:
                attn = attn.masked_fill(~valid[..., None], 0.0)
            h = h + gate1 * attn
            h = h + gate2 * block.ff(block.ff_norm(h) * (1 + scale2) + shift2)
        if dit.long_skip is not None:
            h = dit.long_skip(torch.cat([h, skip], dim=-1))
        return dit.final(h, c)


def load(path: str | Path, *, weights: str = "ema") -> F5Velocity:
    """An `F5Velocity` (F5-TTS ``DiT.forward``) from a flowkit run directory or checkpoint
    (one that ``flowkit import-f5`` wrote, or a fine-tune of it), in eval mode on the CPU.

    Raises:
        CheckpointError: no valid checkpoint. ConfigError: a model F5's forward cannot
            express (not an F5 arch, or with global conditions).
    """
    from flowkit.synth.inference import load_inference_model

    return F5Velocity(load_inference_model(path, weights=weights).model).eval()


def describe_source(path: Path, arch: str, weights: str, *, sha256: str | None = None,
                    dtype: str = "float32") -> dict[str, Any]:
    """The ``imported_from`` record of an imported run: file, size, sha256, config, the
    weights taken and the dtype they were stored in (float32 in the run)."""
    config = next(k for k, v in F5_CONFIGS.items() if v == arch)
    return {"format": "f5-tts", "file": str(path.resolve()), "bytes": path.stat().st_size,
            "sha256": sha256 or file_sha256(path), "config": config, "weights": weights, "dtype": dtype}
