"""Audio that lives inside a dataset rather than in a file of its own.

An `flowkit.data.manifest.Item` names its audio by a `Path`, or by one of the sources
here when an importer found it inside another format: a Lhotse cut (a time span of a
recording, possibly a channel of a multi-channel file), a row of a Hugging Face dataset
saved with ``save_to_disk`` (encoded bytes in its Arrow files, or a path beside them), a
row of a parquet file. A source is small and picklable: prepare's spawn workers receive
it and decode there, so the parent never holds the audio of the corpus in memory.

Each ``load(sample_rate)`` returns float32 mono ``[samples]`` at ``sample_rate`` Hz and
raises `flowkit.data.audio.AudioError` (reason ``unreadable`` or ``empty``) for audio
that cannot be decoded, so a bad row becomes a rejection like a bad file.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Protocol

import attrs
import numpy as np

from flowkit.data import audio as audio_mod

#: per-process caches of opened datasets / parquet row groups (workers reuse them across items)
_OPEN: dict[Any, Any] = {}


class AudioSource(Protocol):
    """What prepare needs of audio that is not a plain file."""

    def load(self, sample_rate: int) -> np.ndarray:
        """float32 mono ``[samples]`` at ``sample_rate`` Hz; raises `AudioError`."""
        ...

    def exists(self) -> bool:
        """Whether the audio is there to be read (a missing file is a ``missing_audio`` rejection)."""
        ...


def load_item_audio(audio: Path | AudioSource, sample_rate: int) -> np.ndarray:
    """Decode an item's audio: a file path through soundfile, anything else through its ``load``.

    Raises:
        AudioError: the audio cannot be decoded (reason ``unreadable`` or ``empty``).
    """
    if isinstance(audio, (str, Path)):
        return audio_mod.load_audio(Path(audio), sample_rate)
    return audio.load(sample_rate)


def decode_encoded(payload: dict[str, Any], base: Path, sample_rate: int) -> np.ndarray:
    """Audio of a Hugging Face ``Audio`` value ``{"bytes", "path"}`` (``decode=False``).

    ``bytes`` (an encoded wav/flac/ogg file) win; else ``path``, relative to ``base``.

    Raises:
        AudioError: neither is usable, or the audio does not decode.
    """
    data = payload.get("bytes") if isinstance(payload, dict) else None
    if data:
        return audio_mod.load_audio(io.BytesIO(data), sample_rate)
    raw = payload.get("path") if isinstance(payload, dict) else None
    if not raw:
        raise audio_mod.AudioError("unreadable", "the audio value holds neither bytes nor a path")
    path = Path(raw) if Path(raw).is_absolute() else base / raw
    return audio_mod.load_audio(path, sample_rate)


@attrs.frozen
class LhotseCutAudio:
    """A Lhotse cut (its ``to_dict()`` form), decoded by Lhotse and resampled by soxr."""

    cut: dict[str, Any]

    def exists(self) -> bool:
        for source in self.cut.get("recording", {}).get("sources", []):
            if source.get("type") == "file" and not Path(source.get("source", "")).is_file():
                return False
        return True

    def load(self, sample_rate: int) -> np.ndarray:
        from lhotse.serialization import deserialize_item

        try:
            cut = deserialize_item(self.cut)
            samples = cut.load_audio()  # [channels, samples] at cut.sampling_rate
        except Exception as exc:  # Lhotse raises many kinds for unreadable audio
            raise audio_mod.AudioError("unreadable", f"lhotse: {type(exc).__name__}: {exc}") from None
        return audio_mod.mono_resampled(np.asarray(samples, dtype=np.float32).T, int(cut.sampling_rate), sample_rate)


@attrs.frozen
class DiskDatasetAudio:
    """Row ``row`` of the ``column`` audio of a dataset saved with ``save_to_disk`` at ``folder``."""

    folder: str
    row: int
    column: str

    def exists(self) -> bool:
        return Path(self.folder).is_dir()

    def load(self, sample_rate: int) -> np.ndarray:
        key = ("disk", self.folder, self.column)
        table = _OPEN.get(key)
        if table is None:
            import datasets

            ds = datasets.load_from_disk(self.folder)
            table = ds.select_columns([self.column]).cast_column(self.column, datasets.Audio(decode=False))
            _OPEN[key] = table
        return decode_encoded(table[self.row][self.column], Path(self.folder), sample_rate)


@attrs.frozen
class ParquetAudio:
    """Row ``row`` of the ``column`` audio of the parquet file ``file`` (read a row group at a time)."""

    file: str
    row: int
    column: str

    def exists(self) -> bool:
        return Path(self.file).is_file()

    def load(self, sample_rate: int) -> np.ndarray:
        import pyarrow.parquet as pq  # installed with `datasets`, which wrote the file

        handle = _OPEN.get(("parquet", self.file))
        if handle is None:
            handle = pq.ParquetFile(self.file)
            starts = np.cumsum([0] + [handle.metadata.row_group(g).num_rows for g in range(handle.num_row_groups)])
            _OPEN[("parquet", self.file)] = handle = (handle, starts)
        parquet, starts = handle
        group = int(np.searchsorted(starts, self.row, side="right")) - 1
        cached = _OPEN.get(("group", self.file, self.column))
        if cached is None or cached[0] != group:  # items come in file order: keep one row group
            cached = (group, parquet.read_row_group(group, columns=[self.column]).column(0).to_pylist())
            _OPEN[("group", self.file, self.column)] = cached
        return decode_encoded(cached[1][self.row - int(starts[group])], Path(self.file).parent, sample_rate)


__all__ = ["AudioSource", "DiskDatasetAudio", "LhotseCutAudio", "ParquetAudio", "decode_encoded", "load_item_audio"]
