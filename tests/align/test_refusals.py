"""The rules that refuse a path as no honest alignment (`flowkit.align.apply.refusal`), on
hand-made paths at 100 frames a second: pause tokens at both ends and between two words."""

from __future__ import annotations

import numpy as np

from flowkit.align.apply import Settings, refusal

#: pause, 4 phonemes, pause, 3 phonemes, pause
IS_PAUSE = np.array([1, 0, 0, 0, 0, 1, 0, 0, 0, 1], dtype=bool)


def _path(*frames: int) -> np.ndarray:
    return np.array(frames, dtype=np.int64)


def test_a_plausible_path_passes() -> None:
    assert refusal(_path(12, 6, 1, 9, 5, 3, 7, 8, 4, 20), IS_PAUSE, 100.0) == ""


def test_a_phoneme_over_a_second_or_a_pause_over_four_is_stretched() -> None:
    assert refusal(_path(12, 6, 101, 9, 5, 3, 7, 8, 4, 20), IS_PAUSE, 100.0) == "align_stretched"
    assert refusal(_path(12, 6, 100, 9, 5, 3, 7, 8, 4, 20), IS_PAUSE, 100.0) == ""  # 1.00 s is allowed
    assert refusal(_path(401, 6, 2, 9, 5, 3, 7, 8, 4, 20), IS_PAUSE, 100.0) == "align_stretched"


def test_most_phonemes_on_one_frame_is_squeezed() -> None:
    """3 of 7 word tokens on one frame (43 %) is over the 40 % bar; 2 of 7 (29 %) is not."""
    assert refusal(_path(60, 1, 1, 9, 5, 3, 1, 8, 4, 20), IS_PAUSE, 100.0) == "align_squeezed"
    assert refusal(_path(60, 1, 1, 9, 5, 3, 7, 8, 4, 20), IS_PAUSE, 100.0) == ""
    assert refusal(_path(60, 1, 1, 9, 5, 3, 1, 8, 4, 20), IS_PAUSE, 100.0,
                   Settings(max_single_frame_share=0.5)) == ""
