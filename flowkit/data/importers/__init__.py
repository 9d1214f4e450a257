"""The inputs `flowkit prepare` reads, each by its own importer, chosen by what the input is.

=========  ===========================================================  ==========================
format     input                                                        module
=========  ===========================================================  ==========================
ljspeech   folder with ``metadata.csv`` + ``wavs/``                      `flowkit.data.manifest`
manifest   flowkit ``.jsonl`` / ``.csv`` manifest                        `flowkit.data.manifest`
libritts   LibriTTS / LibriTTS-R folder (``.wav`` + ``.normalized.txt``) `.libritts`
lhotse     Lhotse cuts, or recordings + supervisions (``lhotse`` extra)  `.lhotse_manifests`
hf         Hugging Face ``save_to_disk`` folder or parquet (``hf`` extra) `.hf_datasets`
=========  ===========================================================  ==========================

``format="auto"`` (the default) looks at each input in the order of `detect_format`;
``--format NAME`` forces one for every input. Every importer yields
`flowkit.data.manifest.Item` or a `flowkit.data.manifest.Rejection` with its reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from flowkit.data.manifest import Item, Rejection, read_manifest, read_metadata_dir
from flowkit.errors import DataError

FORMATS: tuple[str, ...] = ("auto", "ljspeech", "manifest", "libritts", "lhotse", "hf")


def detect_format(path: Path) -> str:
    """The format of one input, by what is there.

    Folders: ``metadata.csv`` -> ljspeech; ``save_to_disk`` files -> hf; Lhotse manifests
    -> lhotse; parquet files -> hf; ``.normalized.txt`` transcripts -> libritts. Files:
    ``*cuts*``/``*recordings*`` ``.jsonl(.gz)`` -> lhotse; ``.parquet`` -> hf; other
    ``.jsonl``/``.csv`` -> manifest.

    Raises:
        DataError: nothing recognisable at ``path`` (the message lists what is accepted).
    """
    from flowkit.data.importers import hf_datasets, lhotse_manifests, libritts

    path = Path(path)
    if path.is_dir():
        if (path / "metadata.csv").is_file():
            return "ljspeech"
        if hf_datasets.is_saved_dataset(path):
            return "hf"
        if lhotse_manifests.looks_like_lhotse(path):
            return "lhotse"
        if hf_datasets.parquet_files(path):
            return "hf"
        if libritts.looks_like_libritts(path):
            return "libritts"
    elif path.is_file():
        if lhotse_manifests.is_manifest_name(path) or path.name.lower().endswith(".jsonl.gz"):
            return "lhotse"
        if path.suffix.lower() == ".parquet":
            return "hf"
        if path.suffix.lower() in (".jsonl", ".csv"):
            return "manifest"
    raise DataError(
        f"{path}: not an input flowkit can read; give a folder with metadata.csv + wavs/, a .jsonl/.csv "
        "manifest, a LibriTTS folder, a Lhotse cuts manifest, or a Hugging Face save_to_disk folder / "
        "parquet file (docs/data-format.md); or name the kind with --format"
    )


def read_inputs(
    inputs: Sequence[Path], layout: str, default_speaker: str, default_language: str,
    languages: Sequence[str] | None, fmt: str = "auto",
) -> Iterator[Item | Rejection]:
    """Items of every input in order (kinds may be mixed under ``fmt="auto"``).

    Raises:
        DataError: an unknown ``fmt``, an input that is not of the kind, or one that cannot be read.
    """
    from flowkit.data.importers import hf_datasets, lhotse_manifests, libritts

    if fmt not in FORMATS:
        raise DataError(f"--format {fmt!r}: unknown; use one of {', '.join(FORMATS)}")
    for raw in inputs:
        path = Path(raw)
        if not path.exists():
            raise DataError(f"{path}: not an input flowkit can read (no such file or folder)")
        kind = detect_format(path) if fmt == "auto" else fmt
        args = (default_speaker, default_language, languages)
        if kind == "ljspeech":
            if not path.is_dir():
                raise DataError(f"{path}: --format ljspeech needs a folder with metadata.csv + wavs/")
            yield from read_metadata_dir(path, layout, *args)
        elif kind == "manifest":
            if not path.is_file():
                raise DataError(f"{path}: --format manifest needs a .jsonl or .csv file")
            yield from read_manifest(path, *args)
        elif kind == "libritts":
            if not path.is_dir():
                raise DataError(f"{path}: --format libritts needs the corpus folder (speaker/chapter/*.wav)")
            yield from libritts.read_libritts(path, *args)
        elif kind == "lhotse":
            yield from lhotse_manifests.read_lhotse(path, *args)
        elif hf_datasets.is_saved_dataset(path):
            yield from hf_datasets.read_saved_dataset(path, *args)
        else:
            yield from hf_datasets.read_parquet(path, *args)


__all__ = ["FORMATS", "detect_format", "read_inputs"]
