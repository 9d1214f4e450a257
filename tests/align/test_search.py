"""MAS and the aligner's losses against brute force on small cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from flowkit.align.model import AlignerNet, beta_binomial_log_prior, forward_sum_loss
from flowkit.align.search import maximum_path


def monotonic_paths(nt: int, n: int):
    """Every assignment of n frames to nt tokens in order, each token >= 1 frame: token durations."""
    for cuts in itertools.combinations(range(1, n), nt - 1):
        edges = (0, *cuts, n)
        yield [edges[k + 1] - edges[k] for k in range(nt)]


def path_score(log_p: np.ndarray, durations: list[int]) -> float:
    total, j = 0.0, 0
    for i, d in enumerate(durations):
        total += float(log_p[j : j + d, i].sum())
        j += d
    return total


@pytest.mark.parametrize("seed", range(6))
def test_mas_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    items = [(int(rng.integers(1, 5)), 0) for _ in range(3)]
    items = [(nt, int(rng.integers(nt, nt + 5))) for nt, _ in items]
    nt_max, n_max = max(i[0] for i in items), max(i[1] for i in items)
    log_p = torch.from_numpy(rng.normal(size=(len(items), n_max, nt_max)).astype(np.float32))
    path = maximum_path(log_p, torch.tensor([i[0] for i in items]), torch.tensor([i[1] for i in items]))
    for b, (nt, n) in enumerate(items):
        best = max(monotonic_paths(nt, n), key=lambda d: path_score(log_p[b].numpy(), d))
        assert path[b, :nt, :n].sum(-1).tolist() == best  # continuous random scores: no ties
        assert int(path[b].sum()) == n and int(path[b, nt:].sum()) == 0 and int(path[b, :, n:].sum()) == 0


def test_mas_path_is_monotonic_and_covers_every_token():
    log_p = torch.randn(2, 40, 9)
    path = maximum_path(log_p, torch.tensor([9, 5]), torch.tensor([40, 23]))
    for b, (nt, n) in enumerate([(9, 40), (5, 23)]):
        owner = path[b, :nt, :n].argmax(0)  # token of each frame
        assert (path[b, :nt, :n].sum(0) == 1).all()
        assert (owner.diff() >= 0).all() and (owner.diff() <= 1).all()
        assert (path[b, :nt, :n].sum(1) >= 1).all()


def test_mas_refuses_more_tokens_than_frames():
    with pytest.raises(ValueError, match="item 1 has 6 tokens for 5 frames"):
        maximum_path(torch.zeros(2, 8, 6), torch.tensor([3, 6]), torch.tensor([8, 5]))


def test_forward_sum_equals_the_sum_over_monotonic_paths():
    """With the CTC blank scored out (-1e4), the loss is -log sum_paths prod_j p(i_j | j) / nt.
    Tolerance 1e-4 relative: float32 CTC against a float64 sum of at most 35 paths."""
    torch.manual_seed(0)
    nt, n = 3, 7
    log_attn = torch.log_softmax(torch.randn(1, n, nt), -1)
    loss = forward_sum_loss(log_attn, torch.tensor([nt]), torch.tensor([n]), blank_log_p=-1e4)
    paths = [math.exp(path_score(log_attn[0].double().numpy(), d)) for d in monotonic_paths(nt, n)]
    assert float(loss) == pytest.approx(-math.log(sum(paths)) / nt, rel=1e-4)


def test_beta_binomial_prior_is_a_distribution_over_the_tokens():
    log_prior = beta_binomial_log_prior(torch.tensor([5, 3]), torch.tensor([12, 4]), 5, 12)
    sums = log_prior.exp().sum(-1)
    assert torch.allclose(sums[0], torch.ones(12), atol=1e-5)  # float32 exp of float64 lgamma sums
    assert torch.allclose(sums[1, :4], torch.ones(4), atol=1e-5)
    # the mass moves along the diagonal: the first frame favours the first token, the last the last
    assert int(log_prior[0, 0].argmax()) == 0 and int(log_prior[0, 11].argmax()) == 4


def test_aligner_attention_is_normalised_over_valid_tokens_only():
    torch.manual_seed(0)
    net = AlignerNet(10, 8, channels=16, attn_dim=8, text_layers=1, frame_layers=1)
    tokens = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    token_mask = tokens > 0
    frame_mask = torch.arange(6)[None, :] < torch.tensor([[6], [4]])
    log_attn = net(tokens, token_mask, torch.randn(2, 6, 8), frame_mask)
    assert log_attn.shape == (2, 6, 4)
    assert torch.allclose(log_attn[0, :, :3].exp().sum(-1), torch.ones(6), atol=1e-5)
    assert torch.allclose(log_attn[1, :4, :2].exp().sum(-1), torch.ones(4), atol=1e-5)
    assert (log_attn[1, :, 2:] <= -1e3).all() and (log_attn[1, 4:] <= -1e3).all()
