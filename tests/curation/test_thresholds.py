"""The per-group robust rule of every criterion (flowkit.curation.criteria.base) on fixed tables."""

from __future__ import annotations

import math

import pytest

from flowkit.curation.criteria.base import MIN_GROUP, by_group, robust_bounds


def test_median_and_mad_bounds_on_a_fixed_table() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 100.0]  # median 3; |x - 3| = 2, 1, 0, 1, 97: MAD 1
    median, scale, low, high = robust_bounds(values, k=2.0, side="both", min_scale=0.0)
    assert median == 3.0
    assert scale == pytest.approx(1.4826)
    assert low == pytest.approx(3.0 - 2 * 1.4826)
    assert high == pytest.approx(3.0 + 2 * 1.4826)


def test_floor_cap_and_min_scale() -> None:
    flat = [0.1] * 20  # MAD 0: min_scale keeps a hair's difference from being an outlier
    _, scale, _, high = robust_bounds(flat, k=4.0, side="high", min_scale=0.05)
    assert scale == 0.05 and high == pytest.approx(0.3)
    assert robust_bounds(flat, k=4.0, side="high", min_scale=0.05, floor=0.35)[3] == 0.35
    assert robust_bounds([4.0] * 20, k=4.0, side="low", min_scale=0.1, cap=3.0)[2] == 3.0
    assert robust_bounds([4.0] * 20, k=4.0, side="low", min_scale=0.1)[3] is None
    nothing = robust_bounds([math.nan, math.nan], k=4.0, side="both", min_scale=0.1)
    assert math.isnan(nothing[0]) and nothing[2:] == (None, None)


def test_groups_get_their_own_bounds_and_small_groups_the_pooled_ones() -> None:
    big_a = [1.0 + 0.01 * i for i in range(MIN_GROUP)] + [5.0]  # one outlier in group a
    big_b = [10.0 + 0.01 * i for i in range(MIN_GROUP)]  # a's outlier value would be far below b's
    small = [5.0, 5.1]  # too few for their own statistics: the pooled bounds (wide) apply
    groups = ["a"] * len(big_a) + ["b"] * len(big_b) + ["c"] * len(small)
    values = big_a + big_b + small

    def bounds(v):
        return robust_bounds(v, k=4.0, side="both", min_scale=0.0)

    reasons, thresholds = by_group(groups, values, bounds, lambda v, t: f"{t.group}: {v}")
    assert [r for r in reasons if r] == ["a: 5.0"]
    by_name = {t.group: t for t in thresholds}
    assert by_name["c"].median == pytest.approx(bounds(values)[0])
    assert by_name["a"].clips == MIN_GROUP + 1 and by_name["c"].clips == 2


def test_theil_sen_line_and_the_flat_fallback() -> None:
    import numpy as np

    from flowkit.curation.criteria.rate import fitted_line, theil_sen

    x = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    y = np.array([2.5, 4.5, 6.5, 8.5, 100.0])  # y = 0.5 + 2x, one point far off the line
    intercept, slope = theil_sen(x, y)
    assert slope == pytest.approx(2.0) and intercept == pytest.approx(0.5)  # the outlier moves neither
    assert fitted_line(x, y) == (intercept, slope)
    flat = np.array([1.0, 1.1, 0.9, 1.0, 1.05])  # one-word prompts: time says nothing of length
    expected = (0.0, pytest.approx(float(np.median(flat / [6, 7, 8, 9, 10]))))
    assert fitted_line(np.array([6.0, 7.0, 8.0, 9.0, 10.0]), flat) == expected
