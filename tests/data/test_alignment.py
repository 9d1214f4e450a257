"""Unit timings: MFA TextGrid import and the energy aligner's estimates."""

from __future__ import annotations

import numpy as np
from praatio import textgrid
from synth_audio import SR, speechlike, write_clip

from flowkit.data.aligners import EnergyAligner
from flowkit.data.dataset import LatentDataset
from flowkit.data.prepare import PrepareSettings


def _grid(path, words, duration):
    grid = textgrid.Textgrid()
    grid.addTier(textgrid.IntervalTier("words", words, 0, duration))
    grid.addTier(textgrid.IntervalTier("phones", [(0.1, 0.2, "HH")], 0, duration))
    grid.save(str(path), format="long_textgrid", includeBlankSpaces=True)


def test_textgrid_words_become_units(tmp_path, quiet_prepare):
    root = tmp_path / "in"
    write_clip(root / "wavs" / "a.wav", speechlike(1.0, 1))
    write_clip(root / "wavs" / "b.wav", speechlike(1.0, 2))
    write_clip(root / "wavs" / "c.wav", speechlike(1.0, 3))
    (root / "metadata.csv").write_text("a|Hello, big World!|s|en\nb|one two|s|en\nc|no grid here|s|en\n")
    grids = tmp_path / "grids"
    grids.mkdir()
    _grid(grids / "a.TextGrid", [(0.1, 0.3, "hello"), (0.3, 0.31, "sp"), (0.31, 0.5, "big"), (0.5, 0.9, "world")], 1.0)
    (grids / "s").mkdir()
    _grid(grids / "s" / "b.TextGrid", [(0.1, 0.4, "one"), (0.4, 0.8, "three")], 1.0)  # 'three' not in text
    summary = quiet_prepare([root], tmp_path / "s.zarr", textgrids=grids)
    assert dict(summary.warnings) == {"textgrid_mismatch": 1, "textgrid_missing": 1}
    ds = LatentDataset.open([tmp_path / "s.zarr"], None)
    by_id = {s.segment_id: s for s in ds.segments}
    assert by_id["a"].units == ((0, 5, 10, 30), (7, 10, 31, 50), (11, 16, 50, 90))
    assert by_id["a"].units_estimated is False
    assert by_id["b"].units is None and by_id["c"].units is None


def test_energy_aligner_splits_speech_by_characters():
    audio = np.zeros(SR * 2, np.float32)
    audio[SR // 2 : SR + SR // 2] = speechlike(1.0, 4, pad=0.0)  # speech from 0.5 s to 1.5 s
    units = EnergyAligner().align("ab abcdef", audio, SR, 100.0, n_frames=201)
    assert [u[:2] for u in units] == [(0, 2), (3, 9)]
    assert abs(units[0][2] - 50) <= 1 and abs(units[-1][3] - 150) <= 1
    assert units[0][3] == units[1][2]  # contiguous
    assert abs((units[0][3] - units[0][2]) - 25) <= 2  # 2 of 8 characters -> a quarter of 100 frames
    assert EnergyAligner().align("", audio, SR, 100.0) == []
    assert EnergyAligner().align("a b c", np.zeros(SR, np.float32), SR, 100.0) == []


def test_prepare_with_energy_aligner_marks_units_estimated(tmp_path, quiet_prepare, small_corpus):
    quiet_prepare([small_corpus], tmp_path / "s.zarr", settings=PrepareSettings(aligner=EnergyAligner()))
    ds = LatentDataset.open([tmp_path / "s.zarr"], None, require_units=True)
    assert len(ds) == 6 and ds.report.rejections == []
    assert all(s.units_estimated and len(s.units) == len(s.text.split()) for s in ds.segments)
