"""The worker side of `flowkit prepare`: one clip decoded, checked, measured and encoded.

`init_worker` runs once per worker process (spawned by `flowkit.data.workers.pool_map`,
or in-process for one worker); `process_item` then runs per clip. Nothing here touches
zarr: the parent writes the results into the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from flowkit.data import audio as audio_mod
from flowkit.data.importers.sources import load_item_audio
from flowkit.data.labels import recorded_buckets
from flowkit.data.manifest import Item, Rejection
from flowkit.data.prepare_settings import PrepareSettings
from flowkit.data.textgrid import TextGridError, read_word_intervals, units_from_intervals

__all__ = ["init_worker", "process_item"]

_WORKER: dict[str, Any] = {}


def init_worker(settings: PrepareSettings, encoder: Any, aligner: Any, textgrids: Path | None,
                limit_threads: bool = True) -> None:
    """Keep what `process_item` reads in this process (``limit_threads``: one BLAS thread, as a pool worker)."""
    if limit_threads:
        # one BLAS thread per worker: threads fighting processes for 2 cores made prepare 7x slower
        from threadpoolctl import threadpool_limits

        _WORKER["limits"] = threadpool_limits(1)
    _WORKER.update(settings=settings, encoder=encoder, aligner=aligner, textgrids=textgrids)


def _find_textgrid(root: Path, item: Item) -> Path | None:
    for candidate in (root / f"{item.segment_id}.TextGrid", root / item.speaker / f"{item.segment_id}.TextGrid"):
        if candidate.is_file():
            return candidate
    return None


def process_item(item: Item) -> dict[str, Any]:
    """Decode, check, measure and encode one clip (runs in a worker).

    Returns a dict with ``rejection`` (a `Rejection`) or the segment's ``latents`` and
    measures; ``warning`` names a problem that did not cost the segment (a TextGrid
    that does not match its text).
    """
    settings: PrepareSettings = _WORKER["settings"]
    encoder = _WORKER["encoder"]
    sr = int(encoder.sample_rate)

    def reject(reason: str, detail: str, seconds: float = 0.0) -> dict[str, Any]:
        return {"rejection": Rejection(item.segment_id, reason, detail, item.source), "seconds": seconds}

    try:
        wave = load_item_audio(item.audio, sr)
    except audio_mod.AudioError as exc:
        return reject(exc.reason, exc.detail)
    seconds = len(wave) / sr
    if seconds < settings.min_seconds:
        return reject("too_short", f"{seconds:.2f} s < prepare.min_seconds = {settings.min_seconds}", seconds)
    if seconds > settings.max_seconds:
        return reject("too_long", f"{seconds:.2f} s > prepare.max_seconds = {settings.max_seconds}", seconds)
    level = audio_mod.active_level_db(wave, sr)
    if level < settings.silence_dbfs:
        return reject("silent", f"active level {level:.1f} dBFS < prepare.silence_dbfs = {settings.silence_dbfs}",
                      seconds)
    latents = np.asarray(encoder.encode(wave), dtype=np.float32)
    if latents.ndim != 2 or latents.shape[0] == 0:
        return reject("encoder_failed", f"encoder returned shape {latents.shape}", seconds)
    stored = latents.astype(settings.latent_dtype)
    if not np.isfinite(stored).all():
        return reject("non_finite_latents", f"latents not finite in {settings.latent_dtype}", seconds)
    frame_rate = float(encoder.frame_rate)
    n_frames = stored.shape[0]
    rate, loudness = recorded_buckets(wave, sr, item.text, frame_rate, n_frames)
    units = None
    estimated = False
    warning = None
    if _WORKER["textgrids"] is not None:
        grid = _find_textgrid(_WORKER["textgrids"], item)
        if grid is None:
            warning = "textgrid_missing"
        else:
            try:
                units = units_from_intervals(
                    read_word_intervals(grid, settings.textgrid_tier), item.text, frame_rate, n_frames
                )
            except TextGridError:
                warning = "textgrid_mismatch"
    if units is None and _WORKER["aligner"] is not None:
        aligned = _WORKER["aligner"].align(item.text, wave, sr, frame_rate, n_frames)
        if aligned:
            units, estimated = aligned, True
        else:
            warning = warning or "aligner_no_units"
    return {
        "latents": stored,
        "seconds": seconds,
        "rate": rate,
        "loudness": loudness,
        "units": None if units is None else tuple(tuple(int(v) for v in u) for u in units),
        "units_estimated": estimated,
        "warning": warning,
    }
