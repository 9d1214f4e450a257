"""Nothing is trained on silently corrupted data.

A store records a CRC-32 per latent chunk and per metadata array at commit. These tests
damage stores the way disks and scripts do - a deleted chunk file (zarr would read it as
zeros), bytes overwritten in place (same size, still finite), an edited metadata array -
and check that opening, the first read, ``flowkit prepare --verify`` and ``flowkit
resume`` each refuse the store with one line naming the chunk or array, while an
interrupted append (which rewrites the last chunk past the committed rows) stays valid.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from reliability_helpers import assert_one_clear_line, cli, segment, train_argv

from flowkit.data.dataset import LatentDataset
from flowkit.data.store import StoreReader, StoreWriter, chunk_file, verify_store
from flowkit.errors import DataError

CHUNK = 64  # frames per latent chunk: the tiny store spans many chunk files


def _write(path: Path, n_per_speaker: int = 8, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    writer = StoreWriter.create(path, encoder_name="synthetic", encoder_params={"dim": 8}, frame_rate=100.0,
                                sample_rate=16000, latent_dim=8, latent_dtype="float32", chunk_frames=CHUNK)
    for s in range(2):
        for k in range(n_per_speaker):
            writer.add(segment(k, s, rng, split="val" if k >= n_per_speaker - 2 else "train"))
    return writer.commit()


@pytest.fixture(scope="module")
def chunked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write(tmp_path_factory.mktemp("chunked") / "c.zarr")


def _copy(store: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "copy.zarr"
    shutil.copytree(store, dst)
    return dst


def _flip(path: Path, k: int, at: int = 4) -> None:
    """Overwrite one byte of chunk ``k`` in place: same size, the float still finite
    (the lowest mantissa byte of a little-endian float32)."""
    file = chunk_file(path, k)
    data = bytearray(file.read_bytes())
    data[at * 4] ^= 0x01
    file.write_bytes(bytes(data))


def _segments_in_chunk(reader: StoreReader, k: int) -> list[int]:
    lo, hi = k * CHUNK, (k + 1) * CHUNK
    return [i for i in range(reader.n_segments) if reader.offsets[i] < hi and reader.offsets[i + 1] > lo]


def test_commit_records_a_checksum_per_chunk_and_per_array(chunked: Path) -> None:
    attrs = json.loads((chunked / "zarr.json").read_text())["attributes"]
    sums = attrs["checksums"]
    assert sums["algorithm"] == "crc32"
    assert len(sums["latent_chunks"]) == -(-attrs["total_frames"] // CHUNK) >= 10
    assert {"offsets", "text", "text_offsets", "units", "max_abs"} <= set(sums["arrays"])
    reader = StoreReader.open(chunked)
    assert verify_store(reader) == len(sums["latent_chunks"])


def test_a_deleted_chunk_is_refused_at_open_not_read_as_zeros(chunked: Path, tmp_path: Path) -> None:
    bad = _copy(chunked, tmp_path)
    chunk_file(bad, 3).unlink()
    with pytest.raises(DataError) as info:
        LatentDataset.open([bad], "train")
    message = str(info.value)
    assert str(bad) in message and "latent chunk 3 (latents/c/3/0, frames 192-256) is missing" in message
    assert "flowkit prepare" in message


def test_a_chunk_of_another_size_is_refused_at_open(chunked: Path, tmp_path: Path) -> None:
    bad = _copy(chunked, tmp_path)
    file = chunk_file(bad, 2)
    file.write_bytes(file.read_bytes() + b"\0" * 16)
    with pytest.raises(DataError, match=r"latent chunk 2 \(latents/c/2/0\) has 2064 bytes, 2048 at prepare"):
        StoreReader.open(bad)


def test_bytes_overwritten_in_place_fail_the_first_read_of_their_chunk(chunked: Path, tmp_path: Path) -> None:
    bad = _copy(chunked, tmp_path)
    _flip(bad, 5)
    reader = StoreReader.open(bad)  # same sizes: the cheap check at open passes
    clean = [i for i in range(reader.n_segments) if reader.offsets[i + 1] <= 4 * CHUNK]  # chunks 0-3 only
    assert clean and all(np.isfinite(x).all() for x in reader.read(clean))
    with pytest.raises(DataError, match=r"latent chunk 5 \(latents/c/5/0, frames 320-384\) fails its checksum"):
        reader.read(_segments_in_chunk(reader, 5)[:1])
    with pytest.raises(DataError, match="latent chunk 5"):
        verify_store(StoreReader.open(bad))


def test_an_edited_metadata_array_is_refused_at_open(chunked: Path, tmp_path: Path) -> None:
    import zarr

    bad = _copy(chunked, tmp_path)
    text = zarr.open_group(str(bad), mode="r+", zarr_format=3)["text"]
    values = text[:]
    values[0] = ord("X") if values[0] != ord("X") else ord("Y")  # same length, another transcript
    text[:] = values
    with pytest.raises(DataError, match=r"metadata array 'text' fails its checksum"):
        StoreReader.open(bad)


def test_an_interrupted_append_leaves_the_store_valid_and_a_commit_extends_the_checksums(
        chunked: Path, tmp_path: Path) -> None:
    path = _copy(chunked, tmp_path)
    before = StoreReader.open(path)
    n0, chunks0 = before.n_segments, verify_store(before)
    rng = np.random.default_rng(5)
    writer = StoreWriter.append_to(path)
    for k in range(20, 26):
        writer.add(segment(k, 0, rng))
    writer._flush_latents()  # the last committed chunk is rewritten with new rows past its end ...
    del writer  # ... and the process dies before commit
    reader = StoreReader.open(path)
    assert reader.n_segments == n0 and verify_store(reader) == chunks0
    writer = StoreWriter.append_to(path)
    for k in range(20, 26):
        writer.add(segment(k, 0, rng))
    writer.commit()
    reader = StoreReader.open(path)
    assert reader.n_segments == n0 + 6 and verify_store(reader) > chunks0


def test_prepare_verify_checks_every_chunk_in_one_line(chunked: Path, tmp_path: Path) -> None:
    good = cli("prepare", "--verify", chunked)
    assert good.returncode == 0, good.stderr
    assert "ok, 16 segments" in good.stdout and "latent chunks and 21 metadata arrays match" in good.stdout
    bad = _copy(chunked, tmp_path)
    _flip(bad, 7)
    result = cli("prepare", "--verify", bad)
    assert result.returncode == DataError.exit_code
    assert_one_clear_line(result, str(bad), "latent chunk 7", "fails its checksum", "flowkit prepare")
    assert not (tmp_path / "copy.zarr.partial").exists()


def test_resume_rechecks_the_stores_as_they_are_now(tmp_path: Path) -> None:
    """The run recorded the data fingerprint; a chunk overwritten since (same size, finite)
    leaves that recorded value unchanged, so resume must look at the store itself."""
    store = _write(tmp_path / "data.zarr")
    run = tmp_path / "run"
    first = cli(*train_argv(store, run, 2)[3:])
    assert first.returncode == 0, first.stderr
    steps_before = sorted(p.name for p in (run / "checkpoints").iterdir())
    metrics_before = (run / "metrics.jsonl").read_text()
    _flip(store, len(json.loads((store / "zarr.json").read_text())["attributes"]["checksums"]["latent_chunks"]) - 1)
    result = cli("resume", run, "--steps", "4")
    assert result.returncode == DataError.exit_code
    assert_one_clear_line(result, str(store), "fails its checksum")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == steps_before
    assert (run / "metrics.jsonl").read_text() == metrics_before
