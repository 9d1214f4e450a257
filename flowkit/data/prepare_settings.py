"""The settings of `flowkit prepare`: the gin configurable ``prepare`` (e.g.
``-b "prepare.max_seconds = 12"``), what the parent and its workers both read.
"""

from __future__ import annotations

from typing import Any

import attrs
import gin

from flowkit.data.store.format import DEFAULT_CHUNK_FRAMES

__all__ = ["PrepareSettings"]


@gin.configurable("prepare")
@attrs.frozen
class PrepareSettings:
    """What prepare accepts and how it writes (gin: ``prepare.<field>``)."""

    min_seconds: float = 0.3  # shorter clips are rejected (too_short)
    max_seconds: float = 30.0  # longer clips are rejected (too_long)
    # Clips whose 95th-percentile 10 ms level is below this are silent. The corpus's
    # *_silence-N clips measure <= -79.7 dBFS, its quietest speech >= -19.4 dBFS.
    silence_dbfs: float = -50.0
    val_fraction: float = 0.05  # share of segments hashed into the "val" split
    min_val_per_speaker: int = 1  # val segments each speaker gets when it has more than this many
    languages: tuple[str, ...] | None = None  # allowed codes; None: any ISO-639-1 two-letter code
    default_language: str = ""  # for inputs without a language column ("" unknown)
    default_speaker: str = ""  # for inputs without a speaker column ("": the input folder's name)
    layout: str = "auto"  # metadata.csv columns, e.g. "id,text,speaker,language"
    latent_dtype: str = "float16"  # float16 | float32
    chunk_frames: int = DEFAULT_CHUNK_FRAMES  # latent rows per chunk file (docs/data-format.md)
    encoder: Any = None  # an encoder instance; None: encoder.log_mel
    aligner: Any = None  # an aligner instance (e.g. @aligner.energy()); None: no estimated timings
    textgrid_tier: str = "words"
