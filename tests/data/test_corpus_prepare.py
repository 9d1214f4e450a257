"""The full asterisk-5voice corpus (skipped when ../shared is absent): prepare and read back."""

from __future__ import annotations

import numpy as np
import pytest

from flowkit.data.audio import load_audio
from flowkit.data.encoders import LogMel
from flowkit.data.store import StoreReader, recompute_fingerprint

pytestmark = [pytest.mark.corpus, pytest.mark.slow]  # ~20 s on 2 shared cores


def test_full_corpus_prepare_reads_back_bit_identical(tmp_path, corpus_dir, quiet_prepare):
    summary = quiet_prepare([corpus_dir], tmp_path / "all.zarr", workers=2)
    lines = [ln.split("|") for ln in (corpus_dir / "metadata.csv").read_text(encoding="utf-8").splitlines()]
    silence = {f[0] for f in lines if "_silence-" in f[0]}
    assert len(lines) == 750 and len(silence) == 17
    assert dict(summary.rejected) == {"silent": 17}
    assert summary.accepted == 733
    reader = StoreReader.open(summary.store)
    assert set(reader.strings["segment_id"]) == {f[0] for f in lines} - silence
    assert set(reader.strings["speaker"]) == {"allison", "june", "carlo", "maxim"}
    assert set(reader.strings["language"]) == {"en", "es", "fr", "it", "ru"}
    expected = {f[0]: f for f in lines}
    for row, seg in enumerate(reader.strings["segment_id"]):
        _, text, speaker, language = expected[seg]
        assert (reader.strings["text"][row], reader.strings["speaker"][row], reader.strings["language"][row]) == (
            text, speaker, language)
    # every byte and field hashes to the fingerprint computed while writing
    assert recompute_fingerprint(reader) == reader.attrs["fingerprint"]
    # and a sample re-encoded here equals what was stored, bit for bit
    encoder = LogMel()
    rows = list(range(0, reader.n_segments, 37))
    for row, got in zip(rows, reader.read(rows), strict=True):
        wave = load_audio(corpus_dir / "wavs" / f"{reader.strings['segment_id'][row]}.flac", 16000)
        want = encoder.encode(wave).astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(got, want)
    val_speakers = {s for s, split in zip(reader.strings["speaker"], reader.strings["split"], strict=True)
                    if split == "val"}
    assert val_speakers == {"allison", "june", "carlo", "maxim"}
