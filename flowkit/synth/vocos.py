"""Vocos from a release directory: its ConvNeXt backbone and ISTFT head as flowkit's own module.

Shape legend: b batch, n frames, d mel bins, h hidden channels, f frequency bins
(``n_fft // 2 + 1``), s audio samples.

Vocos (Siuzdak 2023, "Vocos: Closing the gap between time-domain and Fourier-based neural
vocoders for high-quality audio synthesis", arXiv:2306.00814) keeps the frame rate of its
input throughout: a stack of ConvNeXt blocks (Liu et al. 2022) maps each log-mel frame to
the log-magnitude and phase of one STFT frame, and an inverse STFT makes the audio. Its
public checkpoint charactr/vocos-mel-24khz decodes the features of ``encoder.vocos_mel``
(24 kHz, hop 256, 100 HTK mel bins), the ones F5-TTS v1 is trained on.

A release directory, as published, holds ``config.yaml`` (the ``feature_extractor``,
``backbone`` and ``head`` sections of the reference code's classes) and
``pytorch_model.bin`` (the state dict of the reference ``Vocos`` module). `load_vocos`
reads both and refuses, in one line naming the file and key, anything this module cannot
decode exactly: another backbone or head (the EnCodec and ResNet variants, the IMDCT head,
"same" padding), or weights whose names or shapes do not fit the configuration.

Why own code: the ``vocos`` package imports torchaudio for its feature extractors, and
torchaudio does not load beside the torch flowkit runs on; decoding needs none of it. The
network is torch's own layers and ``torch.istft`` (the call the reference makes for
"center" padding), named like the published state dict so it loads unchanged. Unlike the
reference, the backbone keeps its activations frames-major (`ConvNeXtBlock`), which decodes
faster than the reference's layout (docs/performance.md).
``tests/synth/test_vocos.py`` holds `VocosNet.decode` to <= 1e-4 max abs against the
reference ``Vocos.decode`` (fixtures written by ``tools/vocos_fixtures.py`` from
charactr-platform/vocos at commit 86db50a025ecaddf864366d5dbfc83554ceedc60).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch
from torch import nn

from flowkit.converters.cpu_kernels import channels_last_conv1d
from flowkit.errors import CheckpointError

__all__ = [
    "CONFIG_FILE", "WEIGHTS_FILE", "LoadedVocos", "VocosConfig", "VocosNet", "check_directory", "fit_state",
    "load_vocos", "read_config",
]

CONFIG_FILE = "config.yaml"
WEIGHTS_FILE = "pytorch_model.bin"

# The reference classes a decodable release names (config.yaml ``class_path``).
_CLASSES = {
    "feature_extractor": "vocos.feature_extractors.MelSpectrogramFeatures",
    "backbone": "vocos.models.VocosBackbone",
    "head": "vocos.heads.ISTFTHead",
}
# init_args of each section with the reference defaults (None: required).
_ARGS: dict[str, dict[str, Any]] = {
    "feature_extractor": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256, "n_mels": 100, "padding": "center"},
    "backbone": {"input_channels": None, "dim": None, "intermediate_dim": None, "num_layers": None,
                 "layer_scale_init_value": None, "adanorm_num_embeddings": None},
    "head": {"dim": None, "n_fft": None, "hop_length": None, "padding": "same"},
}
# Keys of the reference state dict that belong to its (torchaudio) feature extractor; flowkit
# computes those features with encoder.vocos_mel, so they are read past.
_FEATURE_PREFIX = "feature_extractor."
MAG_CEILING = 100.0  # the reference clamps the predicted STFT magnitude here (exp(4.6))
LAYER_NORM_EPS = 1e-6  # the reference's LayerNorm epsilon
KERNEL = 7  # ConvNeXt depthwise (and input) convolution width, in frames


@attrs.frozen
class VocosConfig:
    """The decodable part of a Vocos ``config.yaml``.

    Attributes:
        sample_rate, n_fft, hop_length, n_mels: the mel features the model was trained on
            (Hz, samples, samples, bins; HTK scale, power 1, natural log, centred STFT).
        dim, intermediate_dim, num_layers: the ConvNeXt backbone (h, its MLP width, blocks).
        layer_scale: whether the blocks carry a layer-scale vector ``gamma``.
        head_n_fft, head_hop_length: the inverse STFT of the head (samples).
    """

    sample_rate: int = 24000
    n_fft: int = 1024
    hop_length: int = 256
    n_mels: int = 100
    dim: int = 512
    intermediate_dim: int = 1536
    num_layers: int = 8
    layer_scale: bool = True
    head_n_fft: int = 1024
    head_hop_length: int = 256

    def encoder_params(self) -> dict[str, Any]:
        """The ``encoder.vocos_mel`` parameters whose latents this model decodes."""
        return {"sample_rate": self.sample_rate, "n_fft": self.n_fft, "win_length": self.n_fft,
                "hop_length": self.hop_length, "n_mels": self.n_mels}


def _section(doc: Mapping[str, Any], name: str, path: Path) -> dict[str, Any]:
    section = doc.get(name)
    if not isinstance(section, Mapping):
        raise CheckpointError(f"{path}: no '{name}' section; "
                              "a Vocos release config names feature_extractor, backbone and head")
    class_path = section.get("class_path")
    if class_path != _CLASSES[name]:
        raise CheckpointError(
            f"{path}: {name}.class_path = {class_path!r} is another Vocos architecture; flowkit decodes "
            "MelSpectrogramFeatures + VocosBackbone + ISTFTHead (the charactr/vocos-mel-24khz layout)"
        )
    given = section.get("init_args") or {}
    if not isinstance(given, Mapping):
        raise CheckpointError(f"{path}: {name}.init_args is {type(given).__name__}, not a mapping")
    unknown = sorted(set(given) - set(_ARGS[name]))
    if unknown:
        raise CheckpointError(f"{path}: {name}.init_args.{unknown[0]} is not an argument of {class_path}")
    args = {**_ARGS[name], **given}
    for key, value in args.items():
        if value is None and key in ("input_channels", "dim", "intermediate_dim", "num_layers", "n_fft", "hop_length"):
            raise CheckpointError(f"{path}: {name}.init_args.{key} is missing")
    return args


def _positive_int(path: Path, where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CheckpointError(f"{path}: {where} = {value!r} must be a positive integer")
    return value


def read_config(path: str | Path) -> VocosConfig:
    """Read a release ``config.yaml`` (only the file; no weights).

    Raises:
        CheckpointError: the file is missing or not YAML; a section names another
            architecture (EnCodec features, the ResNet backbone, the IMDCT head, AdaLayerNorm,
            "same" padding); sizes that do not fit together. Each names the file and key.
    """
    import yaml

    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file; "
                              f"a Vocos release directory holds {CONFIG_FILE} and {WEIGHTS_FILE}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CheckpointError(f"{path}: cannot be read as YAML ({type(exc).__name__}); "
                              f"give the release's {CONFIG_FILE}") from exc
    if not isinstance(doc, Mapping):
        raise CheckpointError(f"{path}: holds {type(doc).__name__}, "
                              "not a mapping with feature_extractor, backbone, head")
    feats, backbone, head = (_section(doc, name, path) for name in ("feature_extractor", "backbone", "head"))
    if backbone["adanorm_num_embeddings"] is not None:
        raise CheckpointError(
            f"{path}: backbone.init_args.adanorm_num_embeddings = {backbone['adanorm_num_embeddings']!r} is the "
            "bandwidth-conditioned (EnCodec) Vocos; flowkit decodes the mel model, which has none"
        )
    for name, args in (("feature_extractor", feats), ("head", head)):
        if args["padding"] != "center":
            raise CheckpointError(
                f"{path}: {name}.init_args.padding = {args['padding']!r}; "
                "flowkit decodes padding: center (the mel release's)"
            )
    ints = {f"{name}.init_args.{key}": _positive_int(path, f"{name}.init_args.{key}", args[key])
            for name, args, keys in (
                ("feature_extractor", feats, ("sample_rate", "n_fft", "hop_length", "n_mels")),
                ("backbone", backbone, ("input_channels", "dim", "intermediate_dim", "num_layers")),
                ("head", head, ("dim", "n_fft", "hop_length")))
            for key in keys}
    for a, b in (("backbone.init_args.input_channels", "feature_extractor.init_args.n_mels"),
                 ("head.init_args.dim", "backbone.init_args.dim"),
                 ("head.init_args.hop_length", "feature_extractor.init_args.hop_length")):
        if ints[a] != ints[b]:
            raise CheckpointError(f"{path}: {a} = {ints[a]} does not match {b} = {ints[b]}")
    # The reference uses ``layer_scale_init_value or 1 / num_layers``: only a negative value drops gamma.
    scale = backbone["layer_scale_init_value"] or 1.0 / ints["backbone.init_args.num_layers"]
    return VocosConfig(
        sample_rate=ints["feature_extractor.init_args.sample_rate"],
        n_fft=ints["feature_extractor.init_args.n_fft"],
        hop_length=ints["feature_extractor.init_args.hop_length"],
        n_mels=ints["feature_extractor.init_args.n_mels"],
        dim=ints["backbone.init_args.dim"],
        intermediate_dim=ints["backbone.init_args.intermediate_dim"],
        num_layers=ints["backbone.init_args.num_layers"],
        layer_scale=float(scale) > 0,
        head_n_fft=ints["head.init_args.n_fft"],
        head_hop_length=ints["head.init_args.hop_length"],
    )


# ---- the network ----


class ConvNeXtBlock(nn.Module):
    """Depthwise convolution over frames, LayerNorm, a GELU MLP, layer scale, residual.

    ``forward(x [b n h], mask [b n 1] | None) -> [b n h]``, frames-major throughout: the
    depthwise convolution runs in the channels-last layout on the activations as they lie
    (`flowkit.converters.cpu_kernels.channels_last_conv1d`), so no block transposes its input or
    output (the reference keeps ``[b h n]`` and transposes around every LayerNorm and MLP).
    Frames where ``mask`` is 0 are zeroed before the convolution, so a padded item decodes
    as it would alone.
    """

    def __init__(self, dim: int, intermediate_dim: int, layer_scale: bool) -> None:
        super().__init__()
        self.dwconv = nn.Conv1d(dim, dim, KERNEL, padding=KERNEL // 2, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.pwconv1 = nn.Linear(dim, intermediate_dim)
        self.pwconv2 = nn.Linear(intermediate_dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim)) if layer_scale else None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:
            x = x * mask
        conv = self.dwconv
        y = channels_last_conv1d(x.transpose(1, 2), conv.weight, conv.bias, KERNEL // 2, conv.groups)  # [b h n] view
        y = self.pwconv2(nn.functional.gelu(self.pwconv1(self.norm(y.transpose(1, 2)))))  # [b n h]
        if self.gamma is not None:
            y = y * self.gamma
        return x + y


class VocosBackbone(nn.Module):
    """Log-mel ``[b d n]`` -> hidden frames ``[b n h]`` (input convolution, blocks, final norm)."""

    def __init__(self, cfg: VocosConfig) -> None:
        super().__init__()
        self.embed = nn.Conv1d(cfg.n_mels, cfg.dim, KERNEL, padding=KERNEL // 2)
        self.norm = nn.LayerNorm(cfg.dim, eps=LAYER_NORM_EPS)
        self.convnext = nn.ModuleList(
            ConvNeXtBlock(cfg.dim, cfg.intermediate_dim, cfg.layer_scale) for _ in range(cfg.num_layers)
        )
        self.final_layer_norm = nn.LayerNorm(cfg.dim, eps=LAYER_NORM_EPS)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``features [b d n]``, ``mask [b 1 n]`` (1 on valid frames) -> ``[b n h]``."""
        if mask is not None:
            features = features * mask
            mask = mask.transpose(1, 2)  # [b n 1]
        embed = self.embed
        x = channels_last_conv1d(features, embed.weight, embed.bias, KERNEL // 2, 1)  # [b h n], frames-major memory
        x = self.norm(x.transpose(1, 2))  # [b n h]
        for block in self.convnext:
            x = block(x, mask)
        return self.final_layer_norm(x)


class InverseSTFT(nn.Module):
    """Holds the synthesis window (a periodic Hann window of ``n_fft`` samples, a buffer)."""

    def __init__(self, n_fft: int, hop_length: int) -> None:
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft))

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        """Complex ``spec [b f n]`` -> audio ``[b (n - 1) * hop_length]`` (centred frames)."""
        return torch.istft(spec, self.n_fft, self.hop_length, self.n_fft, self.window, center=True)


class ISTFTHead(nn.Module):
    """Hidden frames ``[b n h]`` -> complex STFT ``[b f n]``: log-magnitude and phase per bin."""

    def __init__(self, cfg: VocosConfig) -> None:
        super().__init__()
        self.out = nn.Linear(cfg.dim, cfg.head_n_fft + 2)
        self.istft = InverseSTFT(cfg.head_n_fft, cfg.head_hop_length)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        log_mag, phase = self.out(x).transpose(1, 2).chunk(2, dim=1)
        return torch.polar(log_mag.exp().clamp(max=MAG_CEILING), phase)


class VocosNet(nn.Module):
    """The Vocos decoder: `VocosBackbone` then `ISTFTHead`; parameter names as published."""

    def __init__(self, cfg: VocosConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.backbone = VocosBackbone(cfg)
        self.head = ISTFTHead(cfg)

    def samples(self, frames: int) -> int:
        """Audio samples decoded from ``frames`` latent frames: ``(frames - 1) * hop``."""
        return (frames - 1) * self.cfg.head_hop_length

    @torch.inference_mode()
    def decode(self, features: torch.Tensor, lengths: Sequence[int] | None = None) -> torch.Tensor:
        """Log-mel ``features [b d n]`` -> audio ``[b s]``, ``s = (n - 1) * hop``, float32.

        Args:
            features: natural-log mel frames, channels first, on this module's device.
            lengths: valid frames of each item (default: all ``n``); item ``i`` is decoded
                as it would be alone and its audio ends after ``samples(lengths[i])``
                samples (zeros after that).

        Raises:
            ValueError: ``features`` is not ``[b n_mels n]``, or a length is < 2 or > n.
        """
        b, d, n = features.shape
        if d != self.cfg.n_mels:
            raise ValueError(f"features have {d} channels; this Vocos decodes {self.cfg.n_mels} mel bins")
        lengths = [n] * b if lengths is None else [int(v) for v in lengths]
        if len(lengths) != b or any(not 2 <= v <= n for v in lengths):
            raise ValueError(f"lengths {lengths} must be {b} values in [2, {n}] (a frame pair is the shortest audio)")
        features = features.float()
        mask = None
        if any(v < n for v in lengths):
            frame = torch.arange(n, device=features.device)
            mask = (frame[None, :]
                    < torch.tensor(lengths, device=features.device)[:, None]).to(features.dtype)[:, None, :]
        spec = self.head(self.backbone(features, mask))  # [b f n]
        audio = features.new_zeros(b, self.samples(n))
        # The inverse STFT normalises by the summed window of every frame it sees, so each
        # length is inverted on its own frames only.
        for length in sorted(set(lengths)):
            rows = [i for i, v in enumerate(lengths) if v == length]
            audio[rows, : self.samples(length)] = self.head.istft(spec[rows, :, :length])
        return audio


# ---- loading a release directory ----


@attrs.frozen
class LoadedVocos:
    """A release directory made ready: ``net`` (eval mode, on its device) and its config."""

    net: VocosNet
    config: VocosConfig
    directory: Path


def check_directory(directory: Path) -> None:
    """Refuse a missing release directory, or one without its two files (one line each).

    Raises:
        CheckpointError: naming the directory or the missing file.
    """
    if not directory.is_dir():
        raise CheckpointError(
            f"Vocos directory {directory} does not exist; give the folder holding {CONFIG_FILE} and "
            f"{WEIGHTS_FILE} (as published, e.g. charactr/vocos-mel-24khz)"
        )
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        if not (directory / name).is_file():
            raise CheckpointError(
                f"{directory / name}: no such file; a Vocos release directory holds {CONFIG_FILE} and {WEIGHTS_FILE}"
            )


def _read_weights(path: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError ... by damage
        raise CheckpointError(f"{path}: cannot be read as a PyTorch state dict ({type(exc).__name__}); "
                              "download it again") from exc
    if isinstance(state, Mapping) and "state_dict" in state and isinstance(state["state_dict"], Mapping):
        raise CheckpointError(
            f"{path}: is a training checkpoint (a 'state_dict' key); give the release's {WEIGHTS_FILE}, "
            "the inference module's state dict"
        )
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{path}: holds {type(state).__name__}, not a state dict")
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            raise CheckpointError(f"{path}: key {key!r} holds {type(value).__name__}, not a tensor")
    return {k: v for k, v in state.items() if not k.startswith(_FEATURE_PREFIX)}


def fit_state(net: VocosNet, state: Mapping[str, torch.Tensor], source: Path) -> None:
    """Load ``state`` into ``net`` strictly, or raise naming the first key that does not fit.

    Raises:
        CheckpointError: a key the configuration lacks, one it needs that the file lacks, or
            a shape that differs; with the file, the key and both shapes.
    """
    own = net.state_dict()
    cfg = net.cfg
    arch = (f"config.yaml: dim {cfg.dim}, intermediate_dim {cfg.intermediate_dim}, num_layers {cfg.num_layers}, "
            f"n_mels {cfg.n_mels}, head n_fft {cfg.head_n_fft}")
    extra = sorted(set(state) - set(own))
    if extra:
        raise CheckpointError(f"{source}: key {extra[0]!r} is not in the architecture of {arch}; "
                              "the weights belong to another model")
    missing = sorted(set(own) - set(state))
    if missing:
        raise CheckpointError(f"{source}: lacks key {missing[0]!r}, which the architecture of {arch} needs")
    for key, value in own.items():
        if tuple(state[key].shape) != tuple(value.shape):
            raise CheckpointError(
                f"{source}: key {key!r} has shape {list(state[key].shape)}; {arch} needs {list(value.shape)}"
            )
    net.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=True)


def load_vocos(directory: str | Path, device: str | torch.device = "cpu") -> LoadedVocos:
    """Read a Vocos release directory (``config.yaml`` + ``pytorch_model.bin``) onto ``device``.

    Raises:
        CheckpointError: a missing directory or file, a config of another architecture, or
            weights that do not fit it (see `read_config`, `fit_state`).
    """
    directory = Path(directory)
    check_directory(directory)
    cfg = read_config(directory / CONFIG_FILE)
    net = VocosNet(cfg)
    fit_state(net, _read_weights(directory / WEIGHTS_FILE), directory / WEIGHTS_FILE)
    return LoadedVocos(net=net.to(device).eval(), config=cfg, directory=directory)
