"""Packed rows: an item's output equals its output alone, and the row planner's promises."""

from __future__ import annotations

import pytest
import torch
from model_fixtures import build, collate, make_item

from flowkit.model.packing import PackLayout


def _alone(item, t: torch.Tensor):
    """``(x_t, t, cond)`` of ``item`` as a batch of one without any padding (the dense path)."""
    x0, x1, cond = collate([item])
    return (1 - t[:, None, None]) * x0 + t[:, None, None] * x1, t, cond


@pytest.mark.parametrize("text_path", ["unaligned", "aligned"])
@pytest.mark.parametrize("row_frames", [None, 64, 45])
def test_packed_item_equals_item_alone(text_path, row_frames):
    # Items of several lengths; row_frames 64 / 45 puts two or three items in some rows and
    # leaves row padding; None packs all of them into one row. The prompt of each item is
    # its first frames (a cross-segment prompt looks the same to the model: prompt frames,
    # then the target; its text is both texts), so both kinds are covered by the layout.
    items = [make_item(n, w, seed=s) for s, (n, w) in enumerate([(40, 5), (23, 3), (31, 4), (12, 2), (38, 4)])]
    model = build(text_path=text_path)
    x0, x1, cond = collate(items, pad_frames=5, pad_chars=2, pad_units=1)
    lengths = [len(it.x1) for it in items]
    layout = PackLayout.plan(lengths, row_frames)
    if row_frames is not None:
        assert len(layout.rows) > 1 and any(len(r) > 1 for r in layout.rows)
    t = torch.linspace(0.1, 0.9, len(items))
    x_t = (1 - t[:, None, None]) * x0 + t[:, None, None] * x1
    # Characters sit on frames by a step function of the predicted durations, so durations
    # equal to float tolerance may still move a boundary frame; "even" placement is exact
    # and the durations are compared separately.
    phase = "even" if text_path == "aligned" else "predicted"
    with torch.no_grad():
        packed = model(x_t, t, cond.replace(layout=layout), phase=phase)
        unpacked = model(x_t, t, cond, phase=phase)  # the model plans one row itself
    for i, n in enumerate(lengths):
        with torch.no_grad():
            alone = model(*_alone(items[i], t[i : i + 1]), phase=phase)
        torch.testing.assert_close(packed.output[i, :n], alone.output[0], atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(unpacked.output[i, :n], alone.output[0], atol=2e-5, rtol=1e-5)
        assert torch.count_nonzero(packed.output[i, n:]) == 0
        if text_path == "aligned":
            k = len(items[i].text)
            torch.testing.assert_close(packed.log_duration[i, :k], alone.log_duration[0, :k], atol=2e-5, rtol=1e-5)


def test_packed_gradients_equal_the_padded_batch_of_items_alone():
    items = [make_item(n, 3, seed=s) for s, n in enumerate([30, 17, 25])]
    model = build(text_path="unaligned").train()
    x0, x1, cond = collate(items, pad_frames=3)
    t = torch.tensor([0.3, 0.6, 0.8])
    x_t = (1 - t[:, None, None]) * x0 + t[:, None, None] * x1

    def grads(conds_and_inputs):
        model.zero_grad()
        for xt, tt, c in conds_and_inputs:
            out = model(xt, tt, c).output
            (out * c.frame_mask[..., None]).pow(2).sum().backward()
        return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}

    lengths = [len(it.x1) for it in items]
    packed = grads([(x_t, t, cond.replace(layout=PackLayout.plan(lengths, 40)))])
    alone = grads([
        _alone(it, t[i : i + 1]) for i, it in enumerate(items)
    ])
    assert packed.keys() == alone.keys()
    for k in packed:
        torch.testing.assert_close(packed[k], alone[k], atol=1e-5, rtol=1e-4, msg=k)


def _padding_share(layout: PackLayout) -> float:
    """Share of the packed frames that are padding, in [0, 1)."""
    return 1.0 - sum(layout.lengths) / layout.num_frames if layout.num_frames else 0.0


def test_rows_are_balanced_deterministic_and_keep_every_item_once():
    lengths = [300, 120, 480, 90, 410, 260, 333, 150, 75, 500, 222, 310]
    a = PackLayout.plan(lengths, 1000)
    assert a == PackLayout.plan(lengths, 1000)
    assert sorted(i for row in a.rows for i in row) == list(range(len(lengths)))
    assert len(a.rows) == -(-sum(lengths) // 1000)
    assert _padding_share(a) < 0.05
    assert _padding_share(PackLayout.plan(lengths)) == 0.0
    solo = PackLayout.plan([50, 2000, 60], 500)  # a long item gets a row of its own
    assert (1,) in solo.rows and solo.row_len == 2000
    with pytest.raises(ValueError, match="row_frames"):
        PackLayout.plan(lengths, 0)
