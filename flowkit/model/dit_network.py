"""The DiT network: a diffusion transformer over latent frames, conditioned for text-to-speech.

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

Text reaches the frames through one of two paths (`flowkit.model.dit.DiTConfig.text_path`):

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

from typing import Any

import attrs
import torch
from torch import nn

from flowkit.model.attention import rotary_tables
from flowkit.model.blocks import ConvPositionEmbedding, masked
from flowkit.model.conditioning import GlobalEmbedding, TimeEmbedding
from flowkit.model.conditions import Conditions
from flowkit.model.dit_blocks import DiTBlock, FinalLayer
from flowkit.model.dit_sampling import SamplingConditions, forward_prepared, prepare_sampling
from flowkit.model.duration_head import DurationHead
from flowkit.model.durations import durations_from_log, place_chars
from flowkit.model.packing import PackedIndex, PackLayout
from flowkit.model.text_encoders import TextEncoder

__all__ = ["PHASES", "DiT", "ModelOutput", "ids_on_frames"]

#: The aligned path's phases: characters placed by the predicted durations (training) or
#: evenly within their unit (inference, and the validation pass that measures the gap).
PHASES = ("predicted", "even")


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


def ids_on_frames(cond: Conditions) -> torch.Tensor:
    """The unaligned path's text on frames ``[b n]``, as F5-TTS places it: the character ids
    fill the first frames, the filler id 0 the rest of the item's frames and the padding;
    text beyond the item's frames is cut."""
    k = min(cond.text.shape[1], cond.num_frames)
    ids = torch.zeros(cond.frame_mask.shape, dtype=torch.long, device=cond.text.device)
    ids[:, :k] = cond.text[:, :k].masked_fill(~cond.text_mask[:, :k], 0)
    return ids.masked_fill(~cond.frame_mask, 0)


class DiT(nn.Module):
    """The TTS diffusion transformer; build it with `flowkit.model.dit.DiTConfig.build`.

    Another project's arithmetic under the same parameter names is a subclass that overrides
    the ``make_*`` constructors of the input-stage parts, `rotary` and `text_frames`
    (F5-TTS's: `flowkit.interop.f5_network.F5DiT`).

    Attributes:
        cfg: the `DiTConfig`; latent_dim, vocab_size, n_languages: the data-derived sizes.
    """

    # cfg is typed Any: the config's module builds this network (DiTConfig.build), so this
    # module cannot import it back (tests/core/test_import_cycles.py)
    def __init__(self, cfg: Any, latent_dim: int, vocab_size: int, n_languages: int) -> None:
        super().__init__()
        s = cfg.sizes()
        self.cfg = cfg
        self.latent_dim, self.vocab_size, self.n_languages = latent_dim, vocab_size, n_languages
        dim, text_dim = s["dim"], s["text_dim"]
        self.head_dim = dim // s["heads"]
        self.text = self.make_text_encoder(vocab_size, text_dim, s["conv_layers"])
        if cfg.text_path == "aligned":
            self.duration = DurationHead(
                text_dim, s["dur_hidden"], n_languages, cfg.dur_cond == "emotion"
            )
            # Frames of a valid region that no character covers (pauses between units).
            self.gap = nn.Parameter(torch.zeros(text_dim))
        self.input_proj = nn.Linear(2 * latent_dim + text_dim, dim)
        self.conv_pos = self.make_conv_pos(dim, cfg.conv_pos_kernel) if cfg.conv_pos_kernel else None
        self.time = self.make_time(dim)
        self.globals = self.make_globals(dim, n_languages) if cfg.conditions else None
        self.blocks = nn.ModuleList(
            DiTBlock(dim, s["heads"], s["ff_mult"], float(s["dropout"])) for _ in range(s["depth"])
        )
        self.long_skip = nn.Linear(2 * dim, dim, bias=False) if cfg.long_skip else None
        self.final = FinalLayer(dim, latent_dim)

    def make_text_encoder(self, vocab_size: int, text_dim: int, layers: int) -> nn.Module:
        """The text encoder: ids ``[b L]`` and the valid positions ``[b L]`` (None: all) ->
        ``[b L text_dim]``, zero on invalid positions."""
        return TextEncoder(vocab_size, text_dim, layers)

    def make_conv_pos(self, dim: int, kernel: int) -> nn.Module:
        """The convolutional position embedding of the input stage: ``[b n c]`` and the valid
        frames ``[b n]`` (None: all) -> ``[b n c]`` (the input plus the embedding)."""
        return ConvPositionEmbedding(dim, kernel)

    def make_time(self, dim: int) -> nn.Module:
        """The flow-time embedding: ``t [b]`` -> ``[b dim]``."""
        return TimeEmbedding(dim)

    def make_globals(self, dim: int, n_languages: int) -> nn.Module:
        """The global-condition embedding: `Conditions` of ``b`` items -> ``[b dim]``."""
        return GlobalEmbedding(dim, n_languages)

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
        """Rotary table (complex ``cos + i sin``) for ``n`` frames: ``[n 1 hd/2]``."""
        return rotary_tables(n, self.head_dim, device)

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

    def text_frames(
        self, cond: Conditions, phase: str, valid: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Text features on frames ``[b n text_dim]`` (zero on the items whose text is
        dropped, ``cond.drop_text``) and the aligned path's log durations ``[b nt]`` (None on
        the unaligned path); ``valid`` is ``cond.frame_mask``, or None when every frame is valid."""
        shown = ~cond.drop_text[:, None].expand(cond.frame_mask.shape)
        if self.cfg.text_path == "unaligned":
            return masked(self.text(ids_on_frames(cond), valid), shown), None
        chars, log_duration = self._encode_chars(cond)
        # The placement is a step function of the durations (frame boundaries are rounded),
        # so it has no useful gradient; detaching keeps the flow loss from reaching the
        # duration head, which learns from the duration loss alone.
        weights = durations_from_log(log_duration.detach()) if phase == "predicted" else None
        assign = place_chars(cond, weights).to(chars.dtype)
        frames = assign @ chars
        uncovered = (1.0 - assign.sum(-1)) * cond.frame_mask.to(chars.dtype)
        return masked(frames + uncovered[..., None] * self.gap.to(chars.dtype), shown), log_duration

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
        return prepare_sampling(self, cond, guidance=guidance, phase=phase)

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
            return ModelOutput(output=forward_prepared(self, x_t, t, cond))
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
        text, log_duration = self.text_frames(cond, phase, valid)
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
        out = self.trunk(h, c, rope, packed)
        out = out if packed is None else packed.unpack(out, b)  # dense: no padding to zero
        return ModelOutput(output=out, log_duration=log_duration)

    def trunk(
        self, h: torch.Tensor, c: torch.Tensor, rope: torch.Tensor, packed: PackedIndex | None
    ) -> torch.Tensor:
        """The transformer blocks, the long skip and the final layer: what training and
        sampling share after the input stage. ``h``: ``[b n c]`` frames (``packed`` None) or
        the packed rows of ``packed``; ``c [b c]`` the conditioning of adaLN; ``rope`` the
        rotary table of those frames. Returns ``[b n d]`` or packed rows of ``d`` channels."""
        skip = h
        for block in self.blocks:
            h = block(h, c, rope, packed)
        if self.long_skip is not None:
            h = self.long_skip(torch.cat([h, skip], dim=-1))
        return self.final(h, c, packed)
