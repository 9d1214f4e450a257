"""Hugging Face datasets on local disk as prepare inputs (the ``hf`` extra: ``pip install 'flowkit[hf]'``).

Accepted inputs, read with the ``datasets`` package and nothing fetched from a hub
(``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE`` are set before it is imported):

- a folder written by ``Dataset.save_to_disk`` (``state.json`` + ``dataset_info.json``)
  or ``DatasetDict.save_to_disk`` (``dataset_dict.json``: every split is read);
- a ``.parquet`` file, or a folder of them (searched recursively, sorted), as
  ``Dataset.to_parquet`` or the hub's parquet export writes them.

The audio column is the one whose feature is ``datasets.Audio`` (or the column named
``audio``); it is read undecoded (``Audio(decode=False)``: the encoded bytes, or a path
relative to the dataset) and decoded by soundfile in prepare's workers, row by row, so
the parent never holds the audio. Other columns, first match wins:

- text: ``normalized_text``, ``text_normalized``, ``text``, ``transcription``, ``transcript``, ``sentence``;
- speaker: ``speaker``, ``speaker_id``, ``client_id``; language: ``language``, ``lang``, ``locale``
  (a locale such as ``en-US`` or a name such as ``English`` is mapped by
  `flowkit.data.labels.language_code`, as for every input kind);
- id: ``id``, ``segment_id``, ``audio_id``, ``key`` (else the audio path's stem, else ``<name>-<row>``);
- ``emotion``, ``intensity``, ``split`` as in a flowkit manifest. The split of a
  DatasetDict named ``validation``/``valid``/``dev``/``val`` is ``val``; other splits are
  assigned by prepare.

Rejections: ``missing_audio`` (an empty audio value) and prepare's usual reasons.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from flowkit.data.importers.sources import DiskDatasetAudio, ParquetAudio
from flowkit.data.manifest import Item, Rejection, item_from_fields
from flowkit.errors import DataError

TEXT_COLUMNS = ("normalized_text", "text_normalized", "text", "transcription", "transcript", "sentence")
SPEAKER_COLUMNS = ("speaker", "speaker_id", "client_id")
LANGUAGE_COLUMNS = ("language", "lang", "locale")
ID_COLUMNS = ("id", "segment_id", "audio_id", "key")
VAL_SPLITS = ("validation", "valid", "dev", "val")


def _datasets() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local files only: never ask a hub
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise DataError("reading Hugging Face datasets needs datasets: pip install 'flowkit[hf]'") from None
    datasets.disable_progress_bars()
    return datasets


def is_saved_dataset(path: Path) -> bool:
    """A folder written by ``save_to_disk`` (one dataset or a DatasetDict)."""
    return path.is_dir() and ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file())


def parquet_files(path: Path) -> list[Path]:
    """The parquet files of an input: itself, or every ``*.parquet`` under a folder (sorted)."""
    if path.is_file():
        return [path] if path.suffix.lower() == ".parquet" else []
    return sorted(path.rglob("*.parquet")) if path.is_dir() else []


def _audio_column(features: Any, where: Path) -> str:
    datasets = _datasets()
    found = [name for name, feature in features.items() if isinstance(feature, datasets.Audio)]
    if not found and "audio" in features:
        found = ["audio"]
    if not found:
        raise DataError(f"{where}: no Audio column (columns: {', '.join(features)}); "
                        "cast one with ds.cast_column('audio', datasets.Audio()) before saving")
    return found[0]


def _pick(columns: Sequence[str], names: Sequence[str]) -> str | None:
    return next((n for n in names if n in columns), None)


def _rows(records: Iterator[dict[str, Any]], audio_col: str, columns: Sequence[str], make_audio: Any,
          name: str, where: str, split: str | None, default_speaker: str, default_language: str,
          languages: Sequence[str] | None) -> Iterator[Item | Rejection]:
    text_col = _pick(columns, TEXT_COLUMNS)
    if text_col is None:
        raise DataError(f"{where}: no text column (looked for {', '.join(TEXT_COLUMNS)}; "
                        f"columns: {', '.join(columns)})")
    speaker_col, language_col, id_col = (_pick(columns, c) for c in (SPEAKER_COLUMNS, LANGUAGE_COLUMNS, ID_COLUMNS))
    for row, record in enumerate(records):
        value = record.get(audio_col) or {}
        audio_path = value.get("path") if isinstance(value, dict) else None
        segment_id = str(record[id_col]) if id_col and record.get(id_col) not in (None, "") else (
            Path(audio_path).stem if audio_path else f"{name}-{row:07d}")
        source = f"{where}:{row}"
        if not isinstance(value, dict) or not (value.get("bytes") or value.get("path")):
            yield Rejection(segment_id, "missing_audio", f"column {audio_col!r} is empty in row {row}", source)
            continue
        fields = {
            "id": segment_id, "text": str(record.get(text_col) or ""),
            "speaker": "" if speaker_col is None or record.get(speaker_col) is None else str(record[speaker_col]),
            "language": "" if language_col is None or record.get(language_col) is None else str(record[language_col]),
            **{k: "" if record.get(k) is None else str(record[k]) for k in ("emotion", "intensity")},
            "split": "val" if split in VAL_SPLITS else ("" if record.get("split") is None else str(record["split"])),
        }
        yield item_from_fields(fields, make_audio(row), source, default_speaker or name, default_language, languages)


def read_saved_dataset(path: Path, default_speaker: str, default_language: str,
                       languages: Sequence[str] | None) -> Iterator[Item | Rejection]:
    """Items of a ``save_to_disk`` folder, or a Rejection per unusable row.

    Raises:
        DataError: datasets is not installed, the folder does not load, or it has no audio/text column.
    """
    datasets = _datasets()
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:
        raise DataError(f"{path}: not a dataset saved with save_to_disk ({type(exc).__name__}: {exc})") from None
    parts = [(name, path / name, loaded[name]) for name in loaded] if isinstance(loaded, datasets.DatasetDict) \
        else [(None, path, loaded)]
    for split, folder, ds in parts:
        audio_col = _audio_column(ds.features, folder)
        meta = ds.cast_column(audio_col, datasets.Audio(decode=False))
        name = path.name if split is None else f"{path.name}-{split}"

        def make_audio(row: int, folder: Path = folder, audio_col: str = audio_col) -> DiskDatasetAudio:
            return DiskDatasetAudio(str(folder.resolve()), row, audio_col)

        # metadata in batches; the audio column is read undecoded for its path (ids) and emptiness
        records = (r for batch in meta.iter(batch_size=1000) for r in _unbatch(batch))
        yield from _rows(records, audio_col, list(ds.column_names), make_audio, name, str(folder), split,
                         default_speaker, default_language, languages)


def read_parquet(path: Path, default_speaker: str, default_language: str,
                 languages: Sequence[str] | None) -> Iterator[Item | Rejection]:
    """Items of a parquet file or a folder of them, or a Rejection per unusable row.

    Raises:
        DataError: datasets is not installed, a file is not parquet, or it has no audio/text column.
    """
    datasets = _datasets()
    import pyarrow.parquet as pq  # installed with datasets

    files = parquet_files(Path(path))
    if not files:
        raise DataError(f"{path}: no .parquet file")
    for file in files:
        try:
            parquet = pq.ParquetFile(str(file))
        except Exception as exc:
            raise DataError(f"{file}: not a readable parquet file ({type(exc).__name__}: {exc})") from None
        features = datasets.Features.from_arrow_schema(parquet.schema_arrow)
        audio_col = _audio_column(features, file)
        stream = datasets.load_dataset("parquet", data_files=[str(file)], split="train", streaming=True)
        stream = stream.cast_column(audio_col, datasets.Audio(decode=False))

        def make_audio(row: int, file: Path = file, audio_col: str = audio_col) -> ParquetAudio:
            return ParquetAudio(str(file.resolve()), row, audio_col)

        yield from _rows(iter(stream), audio_col, list(features), make_audio, file.stem, str(file), None,
                         default_speaker, default_language, languages)


def _unbatch(batch: dict[str, list[Any]]) -> Iterator[dict[str, Any]]:
    keys = list(batch)
    for values in zip(*(batch[k] for k in keys), strict=True):
        yield dict(zip(keys, values, strict=True))
