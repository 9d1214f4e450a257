"""Boundary error against reference timings, on tables worked by hand."""

from __future__ import annotations

import math

import pytest

from flowkit.align.scoring import phone_boundary_errors, word_boundary_errors


def test_word_errors_match_boundaries_by_character():
    # the reference joins "in the" into one unit, as the teacher does; the estimate has both words
    ref = {"a": [(0, 6, 10, 30), (7, 10, 31, 50)], "b": [(0, 3, 0, 9)]}
    est = {"a": [(0, 2, 12, 20), (3, 6, 20, 29), (7, 10, 33, 50)], "b": [(0, 3, 4, 9)], "c": [(0, 1, 0, 1)]}
    e = word_boundary_errors(ref, est)
    # starts: |12-10|, |33-31|, |4-0|; ends: |29-30|, |50-50|, |9-9|
    assert (e.count, e.segments) == (6, 2)
    assert e.mean == pytest.approx((2 + 2 + 4 + 1 + 0 + 0) / 6)
    assert e.median == pytest.approx(1.5)
    assert e.p90 == pytest.approx(3.0)  # numpy's linear percentile of [0, 0, 1, 2, 2, 4]


def test_word_errors_without_overlap_are_nan():
    e = word_boundary_errors({"a": [(0, 1, 0, 5)]}, {"b": [(0, 1, 0, 5)]})
    assert e.count == 0 and math.isnan(e.mean)


def test_phone_errors_fold_piper_marks_and_skip_disagreeing_segments():
    # Piper times the stress mark and the length mark as phones of their own
    ref = {"a": [(0, 4, "s"), (4, 5, "ˈ"), (5, 9, "ʌ"), (9, 12, "n"), (12, 14, "l"), (14, 15, "ɔ"), (15, 18, "ː")],
           "b": [(0, 5, "x"), (5, 9, "y")]}
    est = {"a": [(1, 5, "s"), (5, 9, "ˈʌ"), (9, 13, "n"), (13, 18, "lɔː")],
           "b": [(0, 9, "xz")]}  # another string: not comparable
    e, coverage = phone_boundary_errors(ref, est)
    # starts of s, ʌ, n, l against 0, 5, 9, 12
    assert (e.count, e.segments) == (4, 1)
    assert e.mean == pytest.approx((1 + 0 + 0 + 1) / 4)
    assert coverage == pytest.approx(5 / 7)  # "sʌnlɔ" of "sʌnlɔ" + "xy"
