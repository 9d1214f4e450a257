"""A diffusion transformer (DiT) over latent frames, conditioned for text-to-speech.

Shape legend: b batch, n latent frames, d latent channels, nt characters, u units (words),
h attention heads, c model dim.

The network (after F5-TTS, Chen et al. 2024, "F5-TTS: A Fairytaler that Fakes Fluent and
Faithful Speech with Flow Matching") sees, on every frame, the noisy sample ``x_t``, the
prompt latents (clean on prompt frames, zero on the target span: infilling) and the text
aligned to frames; the three are concatenated and projected to the model dim. The flow time
and the global conditions (language, emotion + intensity, rate and loudness buckets) drive
adaLN-Zero modulation of every block (Peebles & Xie 2023, "Scalable Diffusion Models with
Transformers"). Attention uses rotary position embedding (Su et al. 2021, "RoFormer"), so
the model carries over to lengths it was not trained on.

Text reaches the frames through one of two paths (`DiTConfig.text_path`):

- ``unaligned``: the character ids fill the first frames, a filler id (0) the rest of the
  item's frames, as in F5-TTS; the model learns the alignment by itself.
- ``aligned`` (seed "E11"): a ConvNeXt encoder reads the characters, a duration head
  predicts ``log(1 + d)`` frames per character, and each unit's frames are divided among
  its characters (by the predicted durations in training, evenly at inference).

Padding sits at the end of every item (``frame_mask`` and ``text_mask`` are prefixes). The
input stage (text encoder, input projection, convolutional position embedding) runs on the
padded batch with padding zeroed before every convolution. The transformer blocks then run
either on the padded batch itself when it has no padding (attention without any mask, so the
fused kernels apply) or on the items packed into rows (`flowkit.model.packing`: attention,
positions and modulation confined to each item, no compute on padding). Either way an
item's output does not depend on the other items of its batch.

Dropout follows F5-TTS: after the attention output projection and inside the feed-forward,
never on the attention scores (a Bernoulli draw per score costs more than the attention).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from flowkit.errors import ConfigError
from flowkit.model.attention import Attention, rotary_tables, rotary_tables_on_heads
from flowkit.model.blocks import ConvPositionEmbedding, masked
from flowkit.model.conditioning import GlobalEmbedding, TimeEmbedding
from flowkit.model.conditions import Conditions
from flowkit.model.cpu_kernels import Dropout, Linear, linear
from flowkit.model.duration_head import DurationHead
from flowkit.model.durations import durations_from_log, place_chars
from flowkit.model.f5_arch import ARCHS, f5_arch_options
from flowkit.model.packing import PackedIndex, PackLayout
from flowkit.model.presets import PRESETS, SIZE_FIELDS
from flowkit.model.text_encoders import F5TextEncoder, TextEncoder
from flowkit.registry import register

__all__ = [
    "DUR_FILM_PREFIX", "GLOBALS_PREFIX", "DiT", "DiTConfig", "ModelOutput", "SamplingConditions", "model_diff",
]

#: Name prefix of every parameter that ``dur_cond = "emotion"`` adds (the FiLM of the
#: duration head). A parent trained with ``dur_cond = "none"`` lacks exactly these keys.
DUR_FILM_PREFIX = "duration.film."

#: Name prefix of the global-condition embeddings that ``conditions = True`` adds; an
#: imported F5-TTS parent (``conditions = False``) lacks exactly these keys.
GLOBALS_PREFIX = "globals."

TEXT_PATHS = ("unaligned", "aligned")
DUR_CONDS = ("none", "emotion")
PHASES = ("predicted", "even")

# ---- configuration -------------------------------------------------------------------------


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
            outside [0, 1), or ``dur_cond = "emotion"`` without the aligned text path.
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
    # Recompute each block's activations in the backward pass (F5-TTS checkpoint_activations):
    # about a third more compute for a fraction of the activation memory. Not part of the
    # architecture (a checkpoint trained either way loads either way).
    checkpoint_activations: bool = False
    # flowkit | f5_v1 | f5_base: F5-TTS's arithmetic (flowkit.model.f5_arch) so its weights load
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
        if self.arch not in ARCHS:
            raise ConfigError(f"model.dit.arch = {self.arch!r}; use one of: {', '.join(map(repr, ARCHS))}")
        if self.arch != "flowkit" and self.text_path != "unaligned":
            raise ConfigError(
                f"model.dit.arch = {self.arch!r} is F5-TTS's network, which has only the unaligned "
                "text path; set model.dit.text_path = 'unaligned' or arch = 'flowkit'"
            )
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
        """Resolved config (preset plus every effective size) for checkpoints; JSON-safe.

        Runtime settings that do not change the network (``checkpoint_activations``) are
        left out, so turning them on or off never makes two configs differ."""
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
        known = {f.name for f in attrs.fields(cls)} - {"checkpoint_activations"}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"model config has unknown fields {unknown}; known: {sorted(known)}")
        return cls(**dict(d))

    @property
    def f5_options(self) -> dict[str, Any]:
        """F5-TTS's ``text_mask_padding`` and ``pe_attn_head`` of this arch (empty for flowkit's)."""
        return {} if self.arch == "flowkit" else f5_arch_options(self.arch)

    def build(self, latent_dim: int, vocab_size: int, n_languages: int) -> DiT:
        """The network for latents of ``latent_dim`` channels, character ids in
        ``[0, vocab_size)`` (0 = padding) and language ids in ``[0, n_languages]`` (0 = unknown).

        Raises:
            ValueError: a non-positive ``latent_dim`` or ``vocab_size``, or negative ``n_languages``.
        """
        if latent_dim < 1 or vocab_size < 1 or n_languages < 0:
            raise ValueError(
                f"DiTConfig.build: latent_dim={latent_dim}, vocab_size={vocab_size} must be >= 1 "
                f"and n_languages={n_languages} >= 0"
            )
        return DiT(self, int(latent_dim), int(vocab_size), int(n_languages))


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


# ---- output and blocks ---------------------------------------------------------------------


@attrs.frozen
class ModelOutput:
    """What `DiT.forward` returns.

    Attributes:
        output: ``[b n d]`` the flow target prediction (zero on padded frames).
        log_duration: ``[b nt]`` predicted ``log(1 + frames)`` per character (zero on padding),
            aligned text path only, else None.
    """

    output: torch.Tensor
    log_duration: torch.Tensor | None = None


@attrs.frozen
class SamplingConditions:
    """What every step of a sampler shares, computed once by `DiT.prepare_sampling`: all of
    the forward pass that depends on neither the noisy sample ``x_t`` nor the flow time.

    ``g`` passes (1: conditional; 2: conditional then unconditional, for classifier-free
    guidance) run as one batch of ``g b`` items. Shape legend as in the module, and T the
    packed frames of the ``b`` items.

    Attributes:
        cond: the conditions of the conditional pass (``b`` items of ``n`` frames).
        passes: ``g``.
        phase: the aligned path's phase the text was placed with.
        base: ``[g*b n c]`` the input projection of the prompt and the text, bias included
            (``x_t``'s share is added at every step).
        x_weight: ``[c d]`` the input projection's columns that read ``x_t``.
        valid: ``[b n]`` the valid frames, None when the batch has no padding (dense).
        valid_rows: ``valid`` for the ``g*b`` items, or None.
        globals: ``[b c]`` the global-condition embedding (None without conditions).
        rope: the rotary table of the blocks' frames (``[n 1|h hd/2]``, packed ``[T 1|h hd/2]``).
        packed: the items' packed layout, None when dense.
        pack_src: ``[g*T]`` flat position in ``[g*b*n + 1]`` rows of each packed frame of the
            ``g`` stacked sequences (the last row zero), or None when dense.
        unpack_rows, unpack_dst: ``[g*V]`` packed frames that hold an item and their flat
            positions in ``[g*b*n]``, or None when dense.
    """

    cond: Conditions
    passes: int
    phase: str
    base: torch.Tensor
    x_weight: torch.Tensor
    valid: torch.Tensor | None
    valid_rows: torch.Tensor | None
    globals: torch.Tensor | None
    rope: torch.Tensor
    packed: PackedIndex | None
    pack_src: torch.Tensor | None
    unpack_rows: torch.Tensor | None
    unpack_dst: torch.Tensor | None


class DiTBlock(nn.Module):
    """Pre-norm transformer block with adaLN-Zero: shift, scale and a zero-initialised gate
    for each branch come from the conditioning vector, so every block starts as identity."""

    def __init__(self, dim: int, heads: int, ff_mult: int, dropout: float) -> None:
        super().__init__()
        self.modulation = Linear(dim, 6 * dim)
        nn.init.zeros_(self.modulation.weight)
        nn.init.zeros_(self.modulation.bias)
        self.attn_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads, dropout)
        self.ff_norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.ff = nn.Sequential(
            Linear(dim, ff_mult * dim),
            nn.GELU(approximate="tanh"),
            Dropout(dropout),
            Linear(ff_mult * dim, dim),
        )

    def forward(
        self,
        x: torch.Tensor,
        c: torch.Tensor,
        rope: torch.Tensor,
        packed: PackedIndex | None = None,
    ) -> torch.Tensor:
        """``x [b n c]`` (or packed ``[1 T c]``), conditioning ``c [b c]`` per item, rotary
        table ``rope`` (see `Attention`)."""
        mod = self.modulation(F.silu(c))
        mod = mod[:, None, :] if packed is None else packed.per_frame(mod)
        shift1, scale1, gate1, shift2, scale2, gate2 = mod.chunk(6, dim=-1)
        # addcmul: shift + norm * (1 + scale) and x + gate * branch, one pass each
        x = torch.addcmul(x, gate1, self.attn(torch.addcmul(shift1, self.attn_norm(x), 1 + scale1), rope, packed))
        return torch.addcmul(x, gate2, self.ff(torch.addcmul(shift2, self.ff_norm(x), 1 + scale2)))


class FinalLayer(nn.Module):
    """adaLN-modulated norm and a zero-initialised projection to the latent channels."""

    def __init__(self, dim: int, out_dim: int) -> None:
        super().__init__()
        self.modulation = Linear(dim, 2 * dim)
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.proj = Linear(dim, out_dim)
        for layer in (self.modulation, self.proj):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor, c: torch.Tensor, packed: PackedIndex | None = None) -> torch.Tensor:
        mod = self.modulation(F.silu(c))
        shift, scale = (mod[:, None, :] if packed is None else packed.per_frame(mod)).chunk(2, dim=-1)
        return self.proj(torch.addcmul(shift, self.norm(x), 1 + scale))


# ---- the network ---------------------------------------------------------------------------


class DiT(nn.Module):
    """The TTS diffusion transformer; build it with `DiTConfig.build`.

    Attributes:
        cfg: the `DiTConfig`; latent_dim, vocab_size, n_languages: the data-derived sizes.
    """

    def __init__(self, cfg: DiTConfig, latent_dim: int, vocab_size: int, n_languages: int) -> None:
        super().__init__()
        s = cfg.sizes()
        self.cfg = cfg
        self.latent_dim, self.vocab_size, self.n_languages = latent_dim, vocab_size, n_languages
        dim, text_dim = s["dim"], s["text_dim"]
        self.head_dim = dim // s["heads"]
        f5 = cfg.arch != "flowkit"
        if f5:
            self.text = F5TextEncoder(vocab_size, text_dim, s["conv_layers"], cfg.f5_options["text_mask_padding"])
        else:
            self.text = TextEncoder(vocab_size, text_dim, s["conv_layers"])
        if cfg.text_path == "aligned":
            self.duration = DurationHead(
                text_dim, s["dur_hidden"], n_languages, cfg.dur_cond == "emotion"
            )
            # Frames of a valid region that no character covers (pauses between units).
            self.gap = nn.Parameter(torch.zeros(text_dim))
        self.input_proj = Linear(2 * latent_dim + text_dim, dim)
        self.conv_pos = (
            ConvPositionEmbedding(dim, cfg.conv_pos_kernel, f5=f5) if cfg.conv_pos_kernel else None
        )
        self.time = TimeEmbedding(dim, f5=f5)
        self.globals = GlobalEmbedding(dim, n_languages, zero=f5) if cfg.conditions else None
        self.blocks = nn.ModuleList(
            DiTBlock(dim, s["heads"], s["ff_mult"], float(s["dropout"])) for _ in range(s["depth"])
        )
        self.long_skip = Linear(2 * dim, dim, bias=False) if cfg.long_skip else None
        self.final = FinalLayer(dim, latent_dim)

    def compile_blocks(self, **options: Any) -> None:
        """``torch.compile`` the feed-forward of every block and the final layer, in place
        (parameter names and checkpoints unchanged; ``dynamic=True`` so that new batch
        shapes do not recompile). Attention stays eager: its per-item kernels are already
        fused, and the packed layout changes with every batch.

        Raises:
            RuntimeError: torch cannot compile here (no C++ compiler on the CPU, no Triton
                on CUDA) -- raised at the first forward pass.
        """
        options.setdefault("dynamic", True)
        for block in self.blocks:
            block.ff.compile(**options)
        self.final.compile(**options)

    def spec(self) -> dict[str, Any]:
        """Everything needed to rebuild this network: config and data-derived sizes."""
        return {
            "config": self.cfg.to_dict(),
            "latent_dim": self.latent_dim,
            "vocab_size": self.vocab_size,
            "n_languages": self.n_languages,
        }

    def rotary(self, n: int, device: torch.device) -> torch.Tensor:
        """Rotary table (complex ``cos + i sin``) for ``n`` frames: ``[n 1 hd/2]``, or
        ``[n h hd/2]`` when only the first heads rotate (F5-TTS's ``pe_attn_head``)."""
        rotated = self.cfg.f5_options.get("pe_attn_head")
        if rotated is None:
            return rotary_tables(n, self.head_dim, device)
        return rotary_tables_on_heads(n, self.head_dim, self.cfg.sizes()["heads"], rotated, device)

    def _encode_chars(self, cond: Conditions) -> tuple[torch.Tensor, torch.Tensor]:
        """``(encoded characters [b nt text_dim], log_duration [b nt])`` (aligned path)."""
        ids = cond.text.masked_fill(~cond.text_mask, 0)
        chars = self.text(ids, cond.text_mask)
        return chars, self.duration(chars, cond.text_mask, cond)

    def predict_durations(self, cond: Conditions) -> torch.Tensor:
        """Predicted ``log(1 + frames)`` per character ``[b nt]`` (0 on padding).

        Reads only the text and the global conditions, so it serves synthesis before the
        frames exist (see `flowkit.model.durations.unit_frames_from_durations`).

        Raises:
            ValueError: the model uses the unaligned text path (it has no duration head).
        """
        if self.cfg.text_path != "aligned":
            raise ValueError(
                "predict_durations needs model.dit.text_path = 'aligned' (no duration head)"
            )
        return self._encode_chars(cond)[1]

    def _text_frames(
        self, cond: Conditions, phase: str, valid: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Text features on frames ``[b n text_dim]`` and the aligned path's log durations;
        ``valid`` is ``cond.frame_mask``, or None when every frame is valid."""
        n = cond.num_frames
        if self.cfg.text_path == "unaligned":
            # F5-TTS: ids fill the first frames, the filler id 0 the rest of the item's frames;
            # text beyond the item's frames is cut.
            k = min(cond.text.shape[1], n)
            ids = torch.zeros(cond.frame_mask.shape, dtype=torch.long, device=cond.text.device)
            ids[:, :k] = cond.text[:, :k].masked_fill(~cond.text_mask[:, :k], 0)
            ids = ids.masked_fill(~cond.frame_mask, 0)
            if self.cfg.arch != "flowkit":  # F5-TTS encodes a dropped text as filler ids
                return self.text(ids, cond.frame_mask, cond.drop_text, confine=True), None
            return self.text(ids, valid), None
        chars, log_duration = self._encode_chars(cond)
        # The placement is a step function of the durations (frame boundaries are rounded),
        # so it has no useful gradient; detaching keeps the flow loss from reaching the
        # duration head, which learns from the duration loss alone.
        weights = durations_from_log(log_duration.detach()) if phase == "predicted" else None
        assign = place_chars(cond, weights).to(chars.dtype)
        frames = assign @ chars
        uncovered = (1.0 - assign.sum(-1)) * cond.frame_mask.to(chars.dtype)
        return frames + uncovered[..., None] * self.gap.to(chars.dtype), log_duration

    def prepare_sampling(self, cond: Conditions, *, guidance: bool, phase: str = "even") -> SamplingConditions:
        """Everything of the forward pass that neither ``x_t`` nor ``t`` changes, for a sampler
        that calls this model at many flow times on ``cond``: the text encoder and the text
        placed on frames (on the aligned path the duration head too), the prompt, their
        share of the input projection, the global conditions, the packed layout and the
        rotary table. ``guidance``: add the unconditional pass (text and prompt dropped, as
        classifier-free guidance's), batched behind the conditional one. Pass the result to
        `forward` in place of the conditions. Call it under ``torch.no_grad()``.

        Raises:
            ValueError: an unknown ``phase``, or (aligned path) conditions without unit timings.
        """
        if phase not in PHASES:
            raise ValueError(f"phase = {phase!r}; use one of {PHASES}")
        b, n = cond.frame_mask.shape
        frame = cond.frame_mask
        layout = cond.layout if cond.layout is not None else PackLayout.plan(frame.sum(1).tolist())
        dense = layout.is_dense(n)
        valid = None if dense else frame
        passes = [cond]
        if guidance:
            passes.append(cond.replace(drop_text=torch.ones_like(cond.drop_text),
                                       drop_prompt=torch.ones_like(cond.drop_prompt)))
        dtype = self.input_proj.weight.dtype
        features, text = [], None
        for p in passes:
            prompt = masked(p.prompt.to(dtype), frame & ~p.target_mask & ~p.drop_prompt[:, None])
            if text is None or self.cfg.arch != "flowkit":  # F5-TTS encodes a dropped text itself
                text = self._text_frames(p, phase, valid)[0].to(dtype)
            shown = masked(text, ~p.drop_text[:, None].expand(b, n)) if self.cfg.arch == "flowkit" else text
            features.append(torch.cat([prompt, shown], dim=-1))
        d = self.latent_dim
        weight = self.input_proj.weight
        base = linear(torch.cat(features), weight[:, d:].contiguous(), self.input_proj.bias)
        g = len(passes)
        device = frame.device
        if dense:
            packed = pack_src = unpack_rows = unpack_dst = None
            rope = self.rotary(n, device)
        else:
            packed = layout.index(n, device)
            rope = self.rotary(max(packed.max_len, 1), device).index_select(0, packed.pos)
            flat, zero = b * n, g * b * n  # the g stacked batches' rows, then one zero row
            pad = packed.src == flat
            pack_src = torch.cat([torch.where(pad, zero, packed.src + k * flat) for k in range(g)])
            rows = torch.arange(packed.src.shape[0], device=device)
            rows = rows if packed.valid is None else packed.valid
            unpack_rows = torch.cat([rows + k * packed.src.shape[0] for k in range(g)])
            unpack_dst = torch.cat([packed.valid_src + k * flat for k in range(g)])
        return SamplingConditions(
            cond=cond, passes=g, phase=phase, base=base, x_weight=weight[:, :d].contiguous(),
            valid=valid, valid_rows=None if valid is None else valid.repeat(g, 1),
            globals=None if self.globals is None else self.globals(cond), rope=rope, packed=packed,
            pack_src=pack_src, unpack_rows=unpack_rows, unpack_dst=unpack_dst,
        )

    def _forward_sampling(self, x_t: torch.Tensor, t: torch.Tensor, s: SamplingConditions) -> ModelOutput:
        """`forward` on prepared conditions: ``[g*b n d]``, the passes in order."""
        b, n, d = x_t.shape
        g = s.passes
        if d != self.latent_dim or s.cond.frame_mask.shape != (b, n):
            raise ValueError(
                f"x_t {tuple(x_t.shape)} does not match the prepared frame_mask "
                f"{tuple(s.cond.frame_mask.shape)} and latent_dim {self.latent_dim}"
            )
        h = linear(masked(x_t, s.valid), s.x_weight)  # x_t's share, once for every pass
        h = (s.base.view(g, b, n, -1) + h).view(g * b, n, -1)
        if self.conv_pos is not None:
            h = self.conv_pos(h, s.valid_rows, sampling=not torch.is_grad_enabled())
        c = self.time(t.to(x_t.device))
        if s.globals is not None:
            c = c + s.globals
        packed = s.packed
        if packed is None:
            c = c.repeat(g, 1)  # [g*b c]: every pass of an item has the item's conditioning
        else:  # the g passes as g rows of one layout, modulated per frame alike
            c_dim = h.shape[-1]
            h = torch.cat([h.reshape(g * b * n, c_dim), h.new_zeros(1, c_dim)]).index_select(0, s.pack_src)
            h = h.view(g, -1, c_dim)
        skip = h
        for block in self.blocks:
            h = block(h, c, s.rope, packed)
        if self.long_skip is not None:
            h = self.long_skip(torch.cat([h, skip], dim=-1))
        out = self.final(h, c, packed)
        if packed is not None:
            rows = out.reshape(-1, out.shape[-1]).index_select(0, s.unpack_rows)
            out = out.new_zeros(g * b * n, out.shape[-1]).index_copy(0, s.unpack_dst, rows).view(g * b, n, -1)
        return ModelOutput(output=out)

    def forward(
        self,
        x_t: torch.Tensor,
        t: torch.Tensor,
        cond: Conditions | SamplingConditions,
        *,
        phase: str = "predicted",
    ) -> ModelOutput:
        """Predict the schedule's target for ``x_t [b n d]`` at flow times ``t [b]``.

        ``phase`` (aligned path): "predicted" divides unit frames among characters by the
        predicted durations (training), "even" evenly (inference, validation of the gap).
        Items with ``cond.drop_text`` see no text, with ``cond.drop_prompt`` no prompt (CFG).

        ``cond`` may be `SamplingConditions` (`prepare_sampling`; its phase then holds): the
        output is ``[g*b n d]``, every pass of the same ``x_t``, the conditional one first,
        equal to separate calls on the passes' conditions to float32 rounding.

        Raises:
            ValueError: an unknown ``phase``, mismatched shapes, or (aligned path)
                conditions without unit timings.
        """
        if isinstance(cond, SamplingConditions):
            return self._forward_sampling(x_t, t, cond)
        if phase not in PHASES:
            raise ValueError(f"phase = {phase!r}; use one of {PHASES}")
        b, n, d = x_t.shape
        if d != self.latent_dim or cond.frame_mask.shape != (b, n):
            raise ValueError(
                f"x_t {tuple(x_t.shape)} does not match frame_mask {tuple(cond.frame_mask.shape)} "
                f"and latent_dim {self.latent_dim}"
            )
        frame = cond.frame_mask
        layout = cond.layout if cond.layout is not None else PackLayout.plan(frame.sum(1).tolist())
        dense = layout.is_dense(n)
        valid = None if dense else frame  # a batch without padding takes no frame masking
        show_prompt = frame & ~cond.target_mask & ~cond.drop_prompt[:, None]
        prompt = masked(cond.prompt.to(x_t.dtype), show_prompt)
        text, log_duration = self._text_frames(cond, phase, valid)
        if self.cfg.arch == "flowkit":
            text = masked(text, ~cond.drop_text[:, None].expand(b, n))
        h = self.input_proj(torch.cat([masked(x_t, valid), prompt, text.to(x_t.dtype)], dim=-1))
        if self.conv_pos is not None:
            h = self.conv_pos(h, valid)
        c = self.time(t.to(x_t.device))
        if self.globals is not None:
            c = c + self.globals(cond)
        if dense:
            packed, rope = None, self.rotary(n, x_t.device)
        else:
            packed = layout.index(n, x_t.device)
            rope = self.rotary(max(packed.max_len, 1), x_t.device).index_select(0, packed.pos)
            h = packed.pack(h)
        skip = h
        for block in self.blocks:
            if self.cfg.checkpoint_activations and self.training and torch.is_grad_enabled():
                h = torch.utils.checkpoint.checkpoint(block, h, c, rope, packed, use_reentrant=False)
            else:
                h = block(h, c, rope, packed)
        if self.long_skip is not None:
            h = self.long_skip(torch.cat([h, skip], dim=-1))
        out = self.final(h, c, packed)
        out = out if packed is None else packed.unpack(out, b)  # dense: no padding to zero
        return ModelOutput(output=out, log_duration=log_duration)
