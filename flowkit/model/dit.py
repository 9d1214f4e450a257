"""The DiT as a component: its configuration (``model.dit`` in gin), the network it builds,
and how two configs differ.

The DiT itself lives in modules of their own names: the network and its forward pass
(`flowkit.model.dit_network`: the module's docstring tells the architecture), its
transformer blocks (`flowkit.model.dit_blocks`), and what a sampler's steps share
(`flowkit.model.dit_sampling`). `DiT`, `ModelOutput` and `SamplingConditions` are
importable from here as well.

``arch`` names the network class `build` makes, as declared in the ``flowkit.networks``
entry points: flowkit's `DiT`, or a subclass holding another project's arithmetic under the
same parameter names (F5-TTS's: `flowkit.interop.f5_network.F5DiT`).

The network holds standard ``torch.nn`` layers only; what a run changes in a built model
(CPU kernels, activation checkpointing) is applied by `flowkit.converters`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from flowkit.entry_points import networks
from flowkit.errors import ConfigError
from flowkit.model.conditions import TEXT_PATHS
from flowkit.model.dit_network import PHASES, DiT, ModelOutput
from flowkit.model.dit_sampling import SamplingConditions
from flowkit.model.presets import PRESETS, SIZE_FIELDS
from flowkit.registry import network, register

__all__ = [
    "DUR_FILM_PREFIX", "GLOBALS_PREFIX", "PHASES", "DiT", "DiTConfig", "ModelOutput", "SamplingConditions",
    "model_diff",
]

#: Name prefix of every parameter that ``dur_cond = "emotion"`` adds (the FiLM of the
#: duration head). A parent trained with ``dur_cond = "none"`` lacks exactly these keys.
DUR_FILM_PREFIX = "duration.film."

#: Name prefix of the global-condition embeddings that ``conditions = True`` adds; an
#: imported F5-TTS parent (``conditions = False``) lacks exactly these keys.
GLOBALS_PREFIX = "globals."

DUR_CONDS = ("none", "emotion")


@register("model", "dit")
@attrs.frozen
class DiTConfig:
    """Configuration of the `DiT`: a size preset, per-field overrides, and the text path.

    Sizes left at ``None`` come from ``preset`` (`flowkit.model.presets.PRESETS`). The data
    decide the rest: `build` takes the latent dim, vocabulary size and number of languages.
    Classifier-free-guidance dropout is not here: the trainer draws the drop flags.

    Raises:
        ConfigError: an unknown preset, text path or dur_cond, a non-positive size, a dim
            not divisible by the heads, an odd head dim (rotary needs pairs), a dropout
            outside [0, 1), ``dur_cond = "emotion"`` without the aligned text path, or an
            ``arch`` no installed distribution declares (`flowkit.entry_points.networks`).
    """

    preset: str = "small"  # tiny | small | base | f5_base
    dim: int | None = None  # model width c
    depth: int | None = None  # number of DiT blocks
    heads: int | None = None  # attention heads; dim / heads must be even
    ff_mult: int | None = None  # feed-forward width = ff_mult * dim
    text_dim: int | None = None  # character embedding width
    conv_layers: int | None = None  # ConvNeXt layers of the text encoder (0 = none)
    dur_hidden: int | None = None  # width of the duration head (aligned path)
    dropout: float | None = None  # dropout after attention and in the feed-forward, [0, 1)
    text_path: str = "unaligned"  # unaligned (F5-TTS) | aligned (E11: unit timings + durations)
    dur_cond: str = "none"  # none | emotion (E13: emotion FiLM on the duration head)
    conv_pos_kernel: int = 31  # convolutional position embedding as in F5-TTS; 0 = off
    # flowkit | f5_v1 | f5_base (F5-TTS's arithmetic, so its weights load) | a plugin's network
    arch: str = "flowkit"
    # language, emotion, rate, loudness into adaLN; F5-TTS has none (its imports: False)
    conditions: bool = True
    long_skip: bool = False  # F5-TTS's long_skip_connection: Linear(cat(out, in)) over the blocks

    def __attrs_post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ConfigError(
                f"model.dit.preset = {self.preset!r} is not a preset; use one of: {', '.join(PRESETS)}"
            )
        if self.text_path not in TEXT_PATHS:
            raise ConfigError(
                f"model.dit.text_path = {self.text_path!r}; use one of: {', '.join(map(repr, TEXT_PATHS))}"
            )
        if self.dur_cond not in DUR_CONDS:
            raise ConfigError(
                f"model.dit.dur_cond = {self.dur_cond!r}; use one of: {', '.join(map(repr, DUR_CONDS))}"
            )
        archs = networks()
        if self.arch not in archs:
            raise ConfigError(f"model.dit.arch = {self.arch!r}; use one of: {', '.join(map(repr, archs))}")
        if self.dur_cond != "none" and self.text_path != "aligned":
            raise ConfigError(
                f"model.dit.dur_cond = {self.dur_cond!r} conditions the duration head, which only "
                "the aligned text path has; set model.dit.text_path = 'aligned' or dur_cond = 'none'"
            )
        s = self.sizes()
        for name in ("dim", "depth", "heads", "ff_mult", "text_dim", "dur_hidden"):
            if not isinstance(s[name], int) or s[name] < 1:
                raise ConfigError(f"model.dit.{name} = {s[name]!r} must be a positive integer")
        if not isinstance(s["conv_layers"], int) or s["conv_layers"] < 0:
            raise ConfigError(
                f"model.dit.conv_layers = {s['conv_layers']!r} must be an integer >= 0"
            )
        if self.conv_pos_kernel < 0 or (self.conv_pos_kernel and self.conv_pos_kernel % 2 == 0):
            raise ConfigError(
                f"model.dit.conv_pos_kernel = {self.conv_pos_kernel!r} must be odd (F5-TTS: 31) or 0 to disable"
            )
        if s["dim"] % s["heads"] or (s["dim"] // s["heads"]) % 2:
            raise ConfigError(
                f"model.dit.dim = {s['dim']} must be divisible by heads = {s['heads']} into an "
                "even head dim (rotary embedding rotates pairs of channels)"
            )
        if not 0.0 <= float(s["dropout"]) < 1.0:
            raise ConfigError(f"model.dit.dropout = {s['dropout']!r} must be in [0, 1)")

    def sizes(self) -> dict[str, Any]:
        """Every size field, the preset's value where this config leaves it ``None``."""
        base = PRESETS[self.preset]
        return {k: (base[k] if getattr(self, k) is None else getattr(self, k)) for k in SIZE_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """Resolved config (preset plus every effective size) for checkpoints; JSON-safe."""
        return {
            "preset": self.preset,
            **self.sizes(),
            "text_path": self.text_path,
            "dur_cond": self.dur_cond,
            "conv_pos_kernel": self.conv_pos_kernel,
            "arch": self.arch,
            "conditions": self.conditions,
            "long_skip": self.long_skip,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DiTConfig:
        """The config `to_dict` wrote.

        Raises:
            ConfigError: an unknown field (names it) or an invalid value.
        """
        known = {f.name for f in attrs.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"model config has unknown fields {unknown}; known: {sorted(known)}")
        return cls(**dict(d))

    def build(self, latent_dim: int, vocab_size: int, n_languages: int) -> DiT:
        """The network for latents of ``latent_dim`` channels, character ids in
        ``[0, vocab_size)`` (0 = padding) and language ids in ``[0, n_languages]`` (0 = unknown):
        an instance of the class ``arch`` names.

        Raises:
            ValueError: a non-positive ``latent_dim`` or ``vocab_size``, or negative ``n_languages``.
            ConfigError: the arch's network refuses this config (F5-TTS's: a text path other
                than ``unaligned``).
        """
        if latent_dim < 1 or vocab_size < 1 or n_languages < 0:
            raise ValueError(
                f"DiTConfig.build: latent_dim={latent_dim}, vocab_size={vocab_size} must be >= 1 "
                f"and n_languages={n_languages} >= 0"
            )
        return network(self.arch)(self, int(latent_dim), int(vocab_size), int(n_languages))


def model_diff(
    a: DiTConfig | Mapping[str, Any], b: DiTConfig | Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """Fields whose effective values differ: ``{field: (a_value, b_value)}``.

    Configs are compared after resolving presets, so ``preset="tiny"`` equals ``preset="small"``
    with every size overridden to tiny's (the preset name itself is not compared), and an
    explicit default equals an absent one. The one difference init-from allows is
    ``{"dur_cond": ("none", "emotion")}``.
    """
    da = (a if isinstance(a, DiTConfig) else DiTConfig.from_dict(a)).to_dict()
    db = (b if isinstance(b, DiTConfig) else DiTConfig.from_dict(b)).to_dict()
    return {k: (da[k], db[k]) for k in da if k != "preset" and da[k] != db[k]}
