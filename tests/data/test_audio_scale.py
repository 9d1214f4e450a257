"""A float WAV written unscaled (peaks far above full scale) is a rejection, not a clip
prepare levels and encodes as if it were speech; a mastering overshoot is kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from flowkit.data.audio import AudioError, load_audio


def _tone(path: Path, peak: float) -> Path:
    t = np.arange(16000) / 16000
    sf.write(str(path), (peak * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 16000, subtype="FLOAT")
    return path


def test_a_float_file_at_50x_full_scale_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(AudioError) as info:
        load_audio(_tone(tmp_path / "loud.wav", 50.0), 16000)
    assert info.value.reason == "over_full_scale" and "50x full scale" in info.value.detail


def test_an_overshoot_of_a_few_db_is_kept(tmp_path: Path) -> None:
    audio = load_audio(_tone(tmp_path / "hot.wav", 1.5), 16000)
    assert abs(float(np.abs(audio).max()) - 1.5) < 1e-3  # unchanged: float32 sine peak within a sample's rounding
