"""Everything the network is conditioned on, as one typed structure with explicit masks.

Shape legend: b batch, n latent frames, d latent channels, nt characters, u units (words).

Infilling: ``prompt`` holds the clean latents of the visible frames and zeros on the
target span; the network sees it next to the noisy sample and learns to fill the span.
A frame is *valid* where ``frame_mask`` is True (padding is False), *target* where
``target_mask`` is True (always a subset of valid frames); the loss covers target frames.

Text ids use 0 for padding. Global conditions use id 0 for "unknown" where a value may
be missing (emotion, rate bucket, loudness bucket); ``emotion_known`` says whether the
emotion and intensity of an item were labelled.

The aligned text path (seed "E11") also carries unit timings: unit ``k`` of item ``i``
spans frames ``unit_frames[i, k, 0] : unit_frames[i, k, 1]`` and owns the characters whose
``char_unit`` equals ``k`` (``-1``: a character outside every unit, e.g. a space).
"""

from __future__ import annotations

import attrs
import torch

from flowkit.model.packing import PackLayout

#: How text reaches the network: ``"unaligned"`` (F5-TTS: characters padded over the frames),
#: ``"aligned"`` (each unit's characters placed on the frames the unit spans).
TEXT_PATHS = ("unaligned", "aligned")


@attrs.frozen
class Conditions:
    """Model conditions for a batch; every tensor is batch-first on the model's device.

    Attributes:
        frame_mask: bool ``[b n]``, valid (non-padding) frames.
        target_mask: bool ``[b n]``, frames to generate (subset of ``frame_mask``).
        prompt: float ``[b n d]``, clean latents on prompt frames, zero elsewhere (None
            only in a `flowkit.batching.collate.Batch`'s ``conditions``, which makes it
            from the latents where the batch is used).
        text: long ``[b nt]``, character ids, 0 = padding.
        text_mask: bool ``[b nt]``, real characters.
        language: long ``[b]``, language id (0 = unknown).
        emotion: long ``[b]``, emotion id (0 = unknown).
        intensity: float ``[b]``, emotion intensity in [0, 1] (0 where unknown).
        emotion_known: bool ``[b]``, whether emotion/intensity were labelled.
        rate: long ``[b]``, speaking-rate bucket (0 = unknown, 1.. = slow..fast).
        loudness: long ``[b]``, loudness bucket (0 = unknown, 1.. = quiet..loud).
        drop_text: bool ``[b]``, classifier-free-guidance dropout of the text.
        drop_prompt: bool ``[b]``, CFG dropout of the prompt (the whole prompt is hidden).
        char_unit: long ``[b nt]`` or None, unit index of each character, -1 outside units.
        unit_frames: long ``[b u 2]`` or None, frame start/end (end exclusive) of each unit.
        unit_mask: bool ``[b u]`` or None, real units.
        layout: how the model packs the items into rows (`flowkit.model.packing`), planned
            on the CPU by the batch sampler's settings; None: the model plans one row itself
            (which reads the item lengths back from the device).
    """

    frame_mask: torch.Tensor
    target_mask: torch.Tensor
    prompt: torch.Tensor | None
    text: torch.Tensor
    text_mask: torch.Tensor
    language: torch.Tensor
    emotion: torch.Tensor
    intensity: torch.Tensor
    emotion_known: torch.Tensor
    rate: torch.Tensor
    loudness: torch.Tensor
    drop_text: torch.Tensor
    drop_prompt: torch.Tensor
    char_unit: torch.Tensor | None = None
    unit_frames: torch.Tensor | None = None
    unit_mask: torch.Tensor | None = None
    layout: PackLayout | None = None

    @property
    def batch_size(self) -> int:
        return int(self.frame_mask.shape[0])

    @property
    def num_frames(self) -> int:
        return int(self.frame_mask.shape[1])

    def to(self, device: torch.device | str, *, non_blocking: bool = False) -> Conditions:
        """The same conditions on ``device``."""
        return attrs.evolve(
            self,
            **{
                f.name: (v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v)
                for f in attrs.fields(Conditions)
                if (v := getattr(self, f.name)) is not None
            },
        )

    def pin_memory(self) -> Conditions:
        """The same conditions in page-locked CPU memory (for non-blocking copies to CUDA)."""
        return attrs.evolve(
            self,
            **{
                f.name: v.pin_memory()
                for f in attrs.fields(Conditions)
                if isinstance(v := getattr(self, f.name), torch.Tensor)
            },
        )

    def replace(self, **changes: torch.Tensor | None) -> Conditions:
        """A copy with ``changes`` applied (e.g. ``drop_text=torch.ones_like(...)``)."""
        return attrs.evolve(self, **changes)
