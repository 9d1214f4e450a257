"""The bundled demo data: a small real subset of asterisk-5voice shipped inside the package.

150 clips (4 speakers, 5 languages; see ``flowkit/demo/ATTRIBUTION.md`` for voices and
licences), twice: the recordings themselves (``flowkit/demo/clips/``: FLAC + an
LJSpeech-style ``metadata.csv``, input for ``flowkit prepare``), and the store prepared
from them (log-mel latents at 100 Hz, energy-aligner word timings, train and val splits).
``tools/build_demo.py`` rebuilds both from the full corpus.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from flowkit.errors import DataError

DEMO_STORE_NAME = "asterisk5_demo.zarr"
DEMO_CLIPS_NAME = "clips"
#: latent rows per chunk file of the demo store: small, so the padded last chunk costs at most 1.3 MB in git
DEMO_CHUNK_FRAMES = 8192


def _bundled(name: str, marker: str, what: str) -> Path:
    """``flowkit/demo/<name>``, checked by the ``marker`` file inside it.

    Raises:
        DataError: the package was installed without its demo data.
    """
    path = Path(str(resources.files("flowkit") / "demo" / name))
    if not (path / marker).is_file():
        raise DataError(f"{path}: the bundled {what} missing; reinstall flowkit or run tools/build_demo.py")
    return path


def demo_store_path() -> Path:
    """Path of the bundled demo latent store (raises `DataError` when it was not installed)."""
    return _bundled(DEMO_STORE_NAME, "zarr.json", "demo store is")


def demo_clips_path() -> Path:
    """Folder of the bundled demo recordings (``metadata.csv`` + ``wavs/*.flac``; raises
    `DataError` when they were not installed)."""
    return _bundled(DEMO_CLIPS_NAME, "metadata.csv", "demo clips are")


def demo_prepare_settings() -> Any:
    """The `PrepareSettings` the demo store was prepared with from `demo_clips_path`."""
    from flowkit.data.aligners import EnergyAligner
    from flowkit.data.prepare_settings import PrepareSettings

    return PrepareSettings(aligner=EnergyAligner(), chunk_frames=DEMO_CHUNK_FRAMES, val_fraction=0.05,
                           min_val_per_speaker=3)
