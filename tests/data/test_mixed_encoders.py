"""A store whose latents come from another encoder (same width and frame rate) is not mixed in: refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flowkit.data.dataset import LatentDataset
from flowkit.data.encoders import LogMel
from flowkit.data.store import SegmentRecord, StoreWriter
from flowkit.errors import DataError


def _store(path: Path, enc: LogMel) -> Path:
    writer = StoreWriter.create(path, encoder_name="log_mel", encoder_params=enc.params(), frame_rate=enc.frame_rate,
                                sample_rate=enc.sample_rate, latent_dim=enc.latent_dim, latent_dtype="float32")
    rng = np.random.default_rng(0)
    for k in range(3):
        writer.add(SegmentRecord(segment_id=f"s{k}", speaker="a", language="en", emotion="", intensity=float("nan"),
                                 rate=0, loudness=0, split="train", text="la mora",
                                 latents=rng.normal(-4, 1, (40, enc.latent_dim)).astype(np.float32), units=None))
    return writer.commit()


def test_a_store_of_another_encoder_is_refused_naming_both(tmp_path: Path) -> None:
    a = _store(tmp_path / "a.zarr", LogMel())
    b = _store(tmp_path / "b.zarr", LogMel(fmax=7000.0))  # same shape, other filterbank
    with pytest.raises(DataError, match=r"mixes encoders: .*a\.zarr holds encoder\.log_mel.*fmax 8000.*b\.zarr holds "
                                        r"encoder\.log_mel.*fmax 7000\.0"):
        LatentDataset.open([a, b], "train")
    same = LatentDataset.open([a, _store(tmp_path / "c.zarr", LogMel())], "train")
    try:
        assert len(same) == 6
    finally:
        same.close()
