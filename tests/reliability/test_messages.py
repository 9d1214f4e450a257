"""Messages that say the right thing: the aligned text path on a store
without unit timings names what is missing and the fix, not a dict of counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from reliability_helpers import REPO, TINY, assert_one_clear_line, cli, segment

from flowkit.errors import DataError


def test_aligned_path_on_a_store_without_unit_timings_says_what_is_missing(tmp_path: Path) -> None:
    from flowkit.data.store import StoreWriter

    rng = np.random.default_rng(0)
    writer = StoreWriter.create(tmp_path / "plain.zarr", encoder_name="synthetic", encoder_params={"dim": 8},
                                frame_rate=100.0, sample_rate=16000, latent_dim=8, latent_dtype="float32")
    for k in range(8):  # latents given: no unit timings
        writer.add(segment(k, k % 2, rng, split="val" if k >= 6 else "train",
                           latents=rng.standard_normal((60, 8)).astype(np.float32)))
    store = writer.commit()
    bindings = [x for b in TINY for x in ("-b", b)]
    result = cli("train", "gin/e11_aligned.gin", "gin/debug.gin", *bindings, "-b", "model.dit.text_path = 'aligned'",
                 "--data", store, "--out", tmp_path / "run", "--steps", "2", "--device", "cpu", cwd=REPO)
    assert result.returncode == DataError.exit_code
    line = assert_one_clear_line(result, "gin/e11_aligned.gin gin/debug.gin uses model.dit.text_path = 'aligned', "
                                 "which needs unit timings; none of the 6 segments of", str(store),
                                 "flowkit align train gin/align.gin --data STORE --out ALIGN_RUN", "--textgrids DIR")
    assert "{" not in line and "split column" not in line
