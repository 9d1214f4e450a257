"""A corpus of broken latent stores: each one either loads with its bad segments rejected
by reason, or is refused with one `DataError` line naming the store and the problem —
through `LatentDataset.open` / `read` in-process, and through `flowkit train --data BAD`
in a subprocess (one ``error:`` line, no traceback). Nothing may crash.

Each store is a copy of a good tiny store damaged with zarr's API or by editing files,
the way a disk, a careless script or a killed prepare damages one.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from reliability_helpers import assert_one_clear_line, cli, segment, train_argv, write_store

from flowkit.data.dataset import LatentDataset
from flowkit.errors import DataError


def _group(path: Path):
    import zarr

    return zarr.open_group(str(path), mode="r+", zarr_format=3)


def _edit_attrs(path: Path, **changes) -> None:
    node = json.loads((path / "zarr.json").read_text())
    node["attributes"].update(changes)
    (path / "zarr.json").write_text(json.dumps(node))


def _without_checksums(path: Path) -> None:
    """Make ``path`` a store as flowkit wrote it before checksums: the checks behind them must hold alone."""
    node = json.loads((path / "zarr.json").read_text())
    del node["attributes"]["checksums"]
    (path / "zarr.json").write_text(json.dumps(node))


def _missing_array(p: Path) -> None:
    del _group(p)["speaker"]


def _offsets_not_monotonic(p: Path) -> None:
    offsets = _group(p)["offsets"]
    values = offsets[:]
    values[5], values[6] = values[6], values[5]
    offsets[:] = values


def _wrong_dtype(p: Path) -> None:
    g = _group(p)
    values = g["rate"][:]
    g.create_array("rate", shape=values.shape, dtype="int32", overwrite=True)[:] = values.astype(np.int32)


def _latents_float64(p: Path) -> None:
    g = _group(p)
    values = g["latents"][:]
    g.create_array("latents", shape=values.shape, dtype="float64", overwrite=True)[:] = values


def _metadata_length_mismatch(p: Path) -> None:
    _group(p)["intensity"].resize((5,))


def _segment_count_too_big(p: Path) -> None:
    _edit_attrs(p, n_segments=1000)


def _newer_format(p: Path) -> None:
    _edit_attrs(p, format_version=99)


def _no_completion_marker(p: Path) -> None:
    _edit_attrs(p, complete=False)


def _missing_attribute(p: Path) -> None:
    node = json.loads((p / "zarr.json").read_text())
    del node["attributes"]["latent_dim"]
    (p / "zarr.json").write_text(json.dumps(node))


def _garbled_zarr_json(p: Path) -> None:
    (p / "zarr.json").write_text('{"zarr_format": 3, "node_ty')


def _garbled_metadata_chunk(p: Path) -> None:
    chunks = [f for f in (p / "speaker").rglob("*") if f.is_file() and f.name != "zarr.json"]
    chunks[0].write_bytes(b"not zstd at all")


def _zarr_group_not_flowkit(p: Path) -> None:
    import zarr

    shutil.rmtree(p)
    zarr.open_group(str(p), mode="w", zarr_format=3).attrs["hello"] = "world"


def _plain_directory(p: Path) -> None:
    shutil.rmtree(p)
    p.mkdir()
    (p / "notes.txt").write_text("not a store")


def _plain_file(p: Path) -> None:
    shutil.rmtree(p)
    p.write_text("not a store")


def _missing_path(p: Path) -> None:
    shutil.rmtree(p)


#: name -> (damage, a fragment of the one-line DataError)
REFUSED: dict[str, tuple[Callable[[Path], None], str]] = {
    "missing_array": (_missing_array, "missing array 'speaker'"),
    "offsets_not_monotonic": (_offsets_not_monotonic, "'offsets' is not monotonic"),
    "wrong_dtype": (_wrong_dtype, "'rate' has dtype int32, expected int8"),
    "latents_float64": (_latents_float64, "dtype float64"),
    "metadata_length_mismatch": (_metadata_length_mismatch, "metadata length mismatch: 'intensity'"),
    "segment_count_too_big": (_segment_count_too_big, "metadata length mismatch"),
    "newer_format": (_newer_format, "format version 99 is newer"),
    "no_completion_marker": (_no_completion_marker, "incomplete store"),
    "missing_attribute": (_missing_attribute, "latent_dim"),
    "garbled_zarr_json": (_garbled_zarr_json, "unreadable zarr.json"),
    "garbled_metadata_chunk": (_garbled_metadata_chunk, "speaker"),
    "zarr_group_not_flowkit": (_zarr_group_not_flowkit, "not a flowkit latent store"),
    "plain_directory": (_plain_directory, "not a zarr v3 store"),
    "plain_file": (_plain_file, "not a zarr v3 store"),
    "missing_path": (_missing_path, "no such store"),
}


def _damaged(store: Path, tmp_path: Path, damage: Callable[[Path], None]) -> Path:
    path = tmp_path / "bad.zarr"
    shutil.copytree(store, path)
    damage(path)
    return path


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_damaged_store_is_refused_with_one_line(case: str, store: Path, tmp_path: Path) -> None:
    damage, fragment = REFUSED[case]
    bad = _damaged(store, tmp_path, damage)
    with pytest.raises(DataError) as info:
        LatentDataset.open([bad], "train")
    message = str(info.value)
    assert "\n" not in message and str(bad) in message and fragment in message, message


def test_a_half_written_store_is_refused(tmp_path: Path) -> None:
    """A prepare killed before its commit leaves ``<store>.partial``: neither it nor the
    final path (never created) loads."""
    from flowkit.data.store import StoreWriter, partial_path

    final = tmp_path / "half.zarr"
    writer = StoreWriter.create(final, encoder_name="synthetic", encoder_params={"dim": 8}, frame_rate=100.0,
                                sample_rate=16000, latent_dim=8, latent_dtype="float32")
    writer.add(segment(0, 0, np.random.default_rng(0)))  # ... and the process dies here
    partial = partial_path(final)
    assert partial.is_dir() and not final.exists()
    with pytest.raises(DataError, match="interrupted prepare"):
        LatentDataset.open([partial], "train")
    with pytest.raises(DataError, match="no such store"):
        LatentDataset.open([final], "train")


def test_bad_segments_are_rejected_by_reason(tmp_path: Path) -> None:
    """Non-finite latents, empty text, too few frames and inconsistent unit timings: the
    store loads, those segments are rejected with their reason, the rest trains."""
    rng = np.random.default_rng(1)
    nan_latents = np.ones((60, 8), np.float32)
    nan_latents[10, 3] = math.nan
    extra = [
        segment(90, 0, rng, latents=nan_latents),
        segment(91, 0, rng, latents=np.ones((60, 8), np.float32), text="   "),
        segment(92, 1, rng, latents=np.ones((3, 8), np.float32)),
        segment(93, 1, rng),
    ]
    path = write_store(tmp_path / "mixed.zarr", extra=extra)
    g = _group(path)
    units, unit_offsets = g["units"][:], g["unit_offsets"][:]
    row = 16 + 3  # spk1_93: its first unit now ends before it starts
    units[unit_offsets[row]] = [2, 1, 0, 5]
    g["units"][:] = units
    _without_checksums(path)  # as if prepare had written the bad timings (its checksum would refuse the edit)

    ds = LatentDataset.open([path], "train")
    by_id = {r.segment_id: r.reason for r in ds.report.rejections}
    assert by_id == {"spk0_90": "non_finite", "spk0_91": "empty_text", "spk1_92": "too_short", "spk1_93": "bad_units"}
    assert len(ds) == 12 and all(np.isfinite(x).all() for x in ds.read(range(len(ds))))
    assert ds.report.to_dict()["rejected_by_reason"] == {"bad_units": 1, "empty_text": 1, "non_finite": 1,
                                                         "too_short": 1}


@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "older-store"])
def test_latents_damaged_after_prepare_are_caught_at_read(store: Path, tmp_path: Path, checksums: bool) -> None:
    """NaN written into the latents after prepare (bit rot, a stray script): the chunk's
    checksum refuses it on the first read; in a store without checksums the per-segment
    ``max_abs`` no longer tells, so reading the segment must refuse it rather than feed a
    NaN into training."""
    bad = tmp_path / "rot.zarr"
    shutil.copytree(store, bad)
    latents = _group(bad)["latents"]
    values = latents[:]
    values[5:7] = math.nan  # inside segment 0
    latents[:] = values
    if not checksums:
        _without_checksums(bad)
    ds = LatentDataset.open([bad], "train")
    match = (r"latent chunk 0 \(latents/c/0/0, frames 0-\d+\) fails its checksum" if checksums
             else r"spk0_00.*non-finite")
    with pytest.raises(DataError, match=match):
        ds.read(list(range(len(ds))))


@pytest.mark.parametrize("checksums", [True, False], ids=["checksums", "older-store"])
def test_a_truncated_latent_chunk_is_caught_at_open(store: Path, tmp_path: Path, checksums: bool) -> None:
    bad = tmp_path / "cut.zarr"
    shutil.copytree(store, bad)
    chunk = bad / "latents" / "c" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:1000])
    if not checksums:
        _without_checksums(bad)
    with pytest.raises(DataError, match=r"latent chunk 0 \(latents/c/0/0\) has 1000 bytes"):
        LatentDataset.open([bad], "train")


# ---- the same through the CLI -------------------------------------------------------

FAST_CLI = ("offsets_not_monotonic", "newer_format")


def _cli_case(case: str, store: Path, tmp_path: Path) -> None:
    damage, fragment = REFUSED[case]
    bad = _damaged(store, tmp_path, damage)
    argv = train_argv(bad, tmp_path / "run", 2)[3:]  # drop "python -m flowkit"
    result = cli(*argv)
    line = assert_one_clear_line(result, fragment)
    assert result.returncode == DataError.exit_code, line


@pytest.mark.parametrize("case", FAST_CLI)
def test_train_on_a_damaged_store_prints_one_line(case: str, store: Path, tmp_path: Path) -> None:
    _cli_case(case, store, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(set(REFUSED) - set(FAST_CLI)))
def test_train_on_every_damaged_store_prints_one_line(case: str, store: Path, tmp_path: Path) -> None:
    _cli_case(case, store, tmp_path)


def test_train_on_a_store_whose_latents_rotted_stops_with_one_line(store: Path, tmp_path: Path) -> None:
    bad = tmp_path / "rot.zarr"
    shutil.copytree(store, bad)
    latents = _group(bad)["latents"]
    values = latents[:]
    values[:] = math.nan
    latents[:] = values
    result = cli(*train_argv(bad, tmp_path / "run", 2)[3:])
    assert_one_clear_line(result, "fails its checksum")


@pytest.mark.slow
def test_train_on_a_store_with_no_usable_segment_prints_one_line(tmp_path: Path) -> None:
    from flowkit.data.store import StoreWriter

    path = tmp_path / "short.zarr"
    writer = StoreWriter.create(path, encoder_name="synthetic", encoder_params={"dim": 8}, frame_rate=100.0,
                                sample_rate=16000, latent_dim=8, latent_dtype="float32")
    rng = np.random.default_rng(0)
    for k in range(3):
        writer.add(segment(k, 0, rng, latents=np.ones((3, 8), np.float32)))  # all too short
    writer.commit()
    result = cli(*train_argv(path, tmp_path / "run", 2)[3:])
    assert_one_clear_line(result, "no usable training segment", "too_short")
