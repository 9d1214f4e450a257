"""Small synthetic batches and models for the model tests: items are built unpadded, then collated with
as much padding (filled with garbage) as a test asks for."""

from __future__ import annotations

import attrs
import torch

from flowkit.model.conditions import Conditions
from flowkit.model.dit import DUR_FILM_PREFIX, DiT, DiTConfig

LATENT_DIM = 8
VOCAB = 24
SPACE = 2  # separator id in these tests
N_LANGUAGES = 3


@attrs.frozen
class Item:
    x0: torch.Tensor  # [n d]
    x1: torch.Tensor  # [n d]
    n_prompt: int
    text: list[int]
    char_unit: list[int]
    units: list[tuple[int, int]]
    language: int
    emotion: int
    intensity: float
    known: bool
    rate: int
    loudness: int


def make_item(n: int, n_words: int, seed: int) -> Item:
    g = torch.Generator().manual_seed(seed)
    text: list[int] = []
    char_unit: list[int] = []
    for w in range(n_words):
        if w:
            text.append(SPACE)
            char_unit.append(-1)
        k = int(torch.randint(1, 5, (1,), generator=g))
        text += torch.randint(3, VOCAB, (k,), generator=g).tolist()
        char_unit += [w] * k
    # Units tile the frames with a one-frame pause between words where there is room.
    edges = torch.linspace(0, n, n_words + 1).round().long().tolist()
    units = [
        (edges[k] + (1 if k and edges[k + 1] - edges[k] > 2 else 0), edges[k + 1])
        for k in range(n_words)
    ]
    known = bool(torch.rand(1, generator=g) < 0.7)
    return Item(
        x0=torch.randn(n, LATENT_DIM, generator=g),
        x1=torch.randn(n, LATENT_DIM, generator=g),
        n_prompt=int(torch.randint(0, n // 2 + 1, (1,), generator=g)),
        text=text,
        char_unit=char_unit,
        units=units,
        language=int(torch.randint(0, N_LANGUAGES + 1, (1,), generator=g)),
        emotion=int(torch.randint(1, 8, (1,), generator=g)) if known else 0,
        intensity=float(torch.rand(1, generator=g)) if known else 0.0,
        known=known,
        rate=int(torch.randint(0, 6, (1,), generator=g)),
        loudness=int(torch.randint(0, 6, (1,), generator=g)),
    )


def collate(
    items: list[Item],
    *,
    pad_frames: int = 0,
    pad_chars: int = 0,
    pad_units: int = 0,
    garbage_seed: int = 123,
) -> tuple[torch.Tensor, torch.Tensor, Conditions]:
    """``(x0, x1, cond)`` with ``pad_*`` extra padding; padded positions hold garbage."""
    g = torch.Generator().manual_seed(garbage_seed)
    b = len(items)
    n = max(len(it.x1) for it in items) + pad_frames
    nt = max(len(it.text) for it in items) + pad_chars
    u = max(len(it.units) for it in items) + pad_units
    x0 = torch.randn(b, n, LATENT_DIM, generator=g) * 5
    x1 = torch.randn(b, n, LATENT_DIM, generator=g) * 5
    prompt = torch.randn(b, n, LATENT_DIM, generator=g) * 5
    text = torch.randint(1, VOCAB, (b, nt), generator=g)
    char_unit = torch.randint(-1, u, (b, nt), generator=g)
    unit_frames = torch.randint(0, n, (b, u, 2), generator=g)
    frame_mask = torch.zeros(b, n, dtype=torch.bool)
    target_mask = torch.zeros(b, n, dtype=torch.bool)
    text_mask = torch.zeros(b, nt, dtype=torch.bool)
    unit_mask = torch.zeros(b, u, dtype=torch.bool)
    for i, it in enumerate(items):
        m, k, w = len(it.x1), len(it.text), len(it.units)
        x0[i, :m], x1[i, :m] = it.x0, it.x1
        frame_mask[i, :m] = True
        target_mask[i, it.n_prompt : m] = True
        prompt[i, : it.n_prompt] = it.x1[: it.n_prompt]
        prompt[i, it.n_prompt : m] = 0.0
        text[i, :k] = torch.tensor(it.text)
        text_mask[i, :k] = True
        char_unit[i, :k] = torch.tensor(it.char_unit)
        unit_frames[i, :w] = torch.tensor(it.units)
        unit_mask[i, :w] = True

    def per_item(attr: str, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([getattr(it, attr) for it in items], dtype=dtype)

    cond = Conditions(
        frame_mask=frame_mask,
        target_mask=target_mask,
        prompt=prompt,
        text=text,
        text_mask=text_mask,
        language=per_item("language", torch.long),
        emotion=per_item("emotion", torch.long),
        intensity=per_item("intensity", torch.float32),
        emotion_known=per_item("known", torch.bool),
        rate=per_item("rate", torch.long),
        loudness=per_item("loudness", torch.long),
        drop_text=torch.zeros(b, dtype=torch.bool),
        drop_prompt=torch.zeros(b, dtype=torch.bool),
        char_unit=char_unit,
        unit_frames=unit_frames,
        unit_mask=unit_mask,
    )
    return x0, x1, cond


def slice_item(cond: Conditions, i: int) -> Conditions:
    """Item ``i`` of ``cond`` as a batch of one (its padding kept, no packing layout)."""
    return cond.replace(
        layout=None,
        **{
            f.name: getattr(cond, f.name)[i : i + 1]
            for f in attrs.fields(Conditions)
            if isinstance(getattr(cond, f.name), torch.Tensor)
        }
    )


def build(seed: int = 0, **kw) -> DiT:
    torch.manual_seed(seed)
    model = DiTConfig(preset="tiny", **kw).build(LATENT_DIM, VOCAB, N_LANGUAGES)
    # adaLN-Zero starts every block (and the output) at zero; give the weights some life so
    # that the tests below compare non-trivial outputs.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith(DUR_FILM_PREFIX) and torch.count_nonzero(p) == 0:
                p.normal_(0.0, 0.05)
    return model.eval()
