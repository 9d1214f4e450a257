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

import itertools
from collections.abc import Sequence

import attrs
import numpy as np
import torch

from flowkit.model.packing import PackLayout

#: How text reaches the network: ``"unaligned"`` (F5-TTS: characters padded over the frames),
#: ``"aligned"`` (each unit's characters placed on the frames the unit spans).
TEXT_PATHS = ("unaligned", "aligned")


class ItemError(ValueError):
    """An item `Conditions.stack` refuses: ``item`` is its position in the batch, ``message`` the fault."""

    def __init__(self, item: int, message: str) -> None:
        super().__init__(item, message)
        self.item, self.message = item, message

    def __str__(self) -> str:
        return f"item {self.item}: {self.message}"


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

    @classmethod
    def stack(
        cls, frames: Sequence[int] | np.ndarray, targets: Sequence[tuple[int, int]] | np.ndarray,
        text: Sequence[Sequence[int]], *, language: Sequence[int], emotions: Sequence[tuple[int, float | None]],
        rate: Sequence[int], loudness: Sequence[int], prompts: Sequence[np.ndarray | torch.Tensor] | None = None,
        drops: tuple[np.ndarray, np.ndarray] | None = None,
        units: Sequence[Sequence[tuple[int, int, int, int]] | None] | None = None, layout: PackLayout | None = None,
    ) -> Conditions:
        """The conditions of ``b`` items on the CPU, each left-aligned and padded on the right to
        the longest (``n`` frames, ``nt`` >= 1 characters, ``u`` >= 1 units): ``frame_mask`` and
        ``text_mask`` are prefixes, ``text`` is 0 and ``char_unit`` -1 on padding. Every tensor
        is made by `torch.from_numpy` (no copy).

        Args:
            frames, targets: ``[b]`` valid frames and ``[b 2]`` target span (frames
                ``start:end`` inside the valid ones) of each item.
            text: character ids of each item.
            language, rate, loudness: ``[b]`` ids (0 = unknown).
            emotions: ``(emotion id, intensity or None)`` of each item, as
                `flowkit.data.labels.emotion_condition` gives them: ``intensity`` 0 where None,
                ``emotion_known`` where the id is non-zero or an intensity given.
            prompts: clean latents ``[n_p d]`` of each item's first frames (up to its target
                start), as float32 ``prompt``, zero on every other frame; None: ``prompt`` None
                (`flowkit.batching.collate.Batch.cond` makes it).
            drops: ``(drop_text [b], drop_prompt [b])`` bool; None: nothing dropped.
            units: ``(char_start, char_end, frame_start, frame_end)`` of each item's units (ends
                exclusive, no character in two; unit ``k`` is the ``k``-th), None for none; None:
                no ``char_unit``, ``unit_frames``, ``unit_mask`` (the unaligned path).
            layout: the packing plan, carried as given.

        Raises:
            ValueError: no items, inputs of different lengths, a target span outside its
                frames, or a prompt reaching into its target span.
            ItemError: a unit outside its item's characters or frames.
        """
        if not (b := len(text)):
            raise ValueError("Conditions.stack: no items")
        frames, spans = np.asarray(frames, np.int64).reshape(b), np.asarray(targets, np.int64).reshape(b, 2)
        if (bad := ~((spans[:, 0] >= 0) & (spans[:, 0] <= spans[:, 1]) & (spans[:, 1] <= frames))).any():
            raise ValueError(f"Conditions.stack: item {int(np.argmax(bad))}'s target span is outside its frames")
        positions = np.arange(int(frames.max()))
        prompt = None if prompts is None else np.zeros((b, positions.shape[0], prompts[0].shape[1]), np.float32)
        for i, p in enumerate(prompts or ()):
            if p.shape[0] > spans[i, 0]:
                raise ValueError(f"Conditions.stack: item {i}'s prompt reaches into its target span")
            prompt[i, : p.shape[0]] = p
        chars = np.fromiter(map(len, text), np.int64, count=b)
        text_mask = np.arange(max(1, int(chars.max()))) < chars[:, None]
        ids = np.zeros(text_mask.shape, np.int64)
        ids[text_mask] = np.fromiter(itertools.chain.from_iterable(text), np.int64, count=int(chars.sum()))
        emotion = np.fromiter((e for e, _ in emotions), np.int64, count=b)
        intensity = np.fromiter((0.0 if x is None else float(x) for _, x in emotions), np.float32, count=b)
        given = np.fromiter((x is not None for _, x in emotions), bool, count=b)
        drop_text, drop_prompt = np.zeros((2, b), bool) if drops is None else drops
        label_ids = {k: torch.from_numpy(np.asarray(v, np.int64).reshape(b))
                     for k, v in (("language", language), ("rate", rate), ("loudness", loudness))}
        return cls(
            frame_mask=torch.from_numpy(positions < frames[:, None]),
            target_mask=torch.from_numpy((positions >= spans[:, :1]) & (positions < spans[:, 1:])),
            prompt=None if prompt is None else torch.from_numpy(prompt),
            text=torch.from_numpy(ids),
            text_mask=torch.from_numpy(text_mask),
            emotion=torch.from_numpy(emotion),
            intensity=torch.from_numpy(intensity),
            emotion_known=torch.from_numpy((emotion > 0) | given),
            drop_text=torch.from_numpy(np.asarray(drop_text, bool).reshape(b)),
            drop_prompt=torch.from_numpy(np.asarray(drop_prompt, bool).reshape(b)),
            layout=layout,
            **label_ids,
            **({} if units is None else _unit_tensors(units, frames, chars, text_mask.shape[1])),
        )

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


def _ragged(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(row, col)`` int64 ``[sum(lengths)]`` of every cell of rows of ``lengths`` cells."""
    rows = np.repeat(np.arange(lengths.shape[0]), lengths)
    cols = np.arange(rows.shape[0]) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return rows, cols


def _unit_tensors(
    units: Sequence[Sequence[tuple[int, int, int, int]] | None], frames: np.ndarray, chars: np.ndarray, nt: int
) -> dict[str, torch.Tensor]:
    """``char_unit [b nt]``, ``unit_frames [b u 2]``, ``unit_mask [b u]`` of every item's units
    at once (`Conditions.stack`); ItemError for the first unit outside its item."""
    b = len(units)
    counts = np.fromiter((len(x or ()) for x in units), np.int64, count=b)
    u = max(1, int(counts.max()))
    char_unit = np.full((b, nt), -1, np.int64)
    unit_frames, unit_mask = np.zeros((b, u, 2), np.int64), np.zeros((b, u), bool)
    if int(counts.sum()):
        flat = np.asarray([unit for x in units for unit in (x or ())], dtype=np.int64).reshape(-1, 4)
        item, k = _ragged(counts)
        cs, ce, fs, fe = flat.T
        bad = ~((cs >= 0) & (cs <= ce) & (ce <= chars[item]) & (fs >= 0) & (fs <= fe) & (fe <= frames[item]))
        if bad.any():
            first = int(np.argmax(bad))
            (c0, c1, f0, f1), i = flat[first].tolist(), int(item[first])
            raise ItemError(i, f"unit {int(k[first])} spans characters {c0}:{c1} and frames {f0}:{f1}, outside its "
                               f"{int(chars[i])} characters / {int(frames[i])} frames")
        unit_frames[item, k] = flat[:, 2:]
        unit_mask[item, k] = True
        rows, cols = _ragged(ce - cs)  # every character of unit k of item i gets k
        char_unit[item[rows], cs[rows] + cols] = k[rows]
    return {"char_unit": torch.from_numpy(char_unit), "unit_frames": torch.from_numpy(unit_frames),
            "unit_mask": torch.from_numpy(unit_mask)}
