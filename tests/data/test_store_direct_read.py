"""Metadata arrays read straight from their chunk files equal zarr's own read of them."""

from __future__ import annotations

import math

import numpy as np
import zarr

from flowkit.data.store import (
    SEGMENT_ARRAYS,
    STRING_FIELDS,
    SegmentRecord,
    StoreReader,
    StoreWriter,
)
from flowkit.data.store.direct import read_direct as _read_direct


def test_direct_read_equals_zarr(tmp_path, monkeypatch):
    import flowkit.data.store.writer as store_writer

    monkeypatch.setattr(store_writer, "METADATA_CHUNK", 64)  # several chunks per array, a partial last one
    monkeypatch.setattr(store_writer, "BLOB_CHUNK", 256)
    path = tmp_path / "s.zarr"
    writer = StoreWriter.create(path, encoder_name="t", encoder_params={}, frame_rate=100.0, sample_rate=16000,
                                latent_dim=3, chunk_frames=16)
    rng = np.random.default_rng(0)
    for i in range(300):
        writer.add(SegmentRecord(f"seg{i}", f"spk{i % 7}", ("en", "ru")[i % 2], "", math.nan if i % 3 else 0.5, i % 6,
                                 i % 5, "val" if i % 9 == 0 else "train", "привет " * (i % 4) + f"text {i}",
                                 rng.standard_normal((1 + i % 5, 3)).astype(np.float16),
                                 ((0, 1, 0, 1),) if i % 2 else None))
    writer.commit()
    group = zarr.open_group(str(path), mode="r")
    reader = StoreReader.open(path)
    names = ["offsets", "unit_offsets", "units", *STRING_FIELDS, *(f"{n}_offsets" for n in STRING_FIELDS),
             *SEGMENT_ARRAYS]
    for name in names:
        array = group[name]
        for stop in (0, 1, 63, 64, 65, array.shape[0]):
            stop = min(stop, array.shape[0])
            direct = _read_direct(path / name, array, stop)
            assert direct is not None, name
            np.testing.assert_array_equal(direct, np.asarray(array[:stop]), err_msg=name)
            assert direct.dtype == array.dtype
    assert reader.strings["text"][7] == "привет " * 3 + "text 7" and reader.n_segments == 300
