"""The bundled demo store: a small real subset of asterisk-5voice shipped inside the package.

150 clips (4 speakers, 5 languages; see ``flowkit/demo/ATTRIBUTION.md`` for voices and
licences), log-mel latents at 100 Hz, energy-aligner word timings, train and val splits.
``tools/build_demo.py`` rebuilds it from the full corpus.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from flowkit.errors import DataError

DEMO_STORE_NAME = "asterisk5_demo.zarr"


def demo_store_path() -> Path:
    """Path of the bundled demo latent store.

    Raises:
        DataError: the package was installed without its demo data.
    """
    path = Path(str(resources.files("flowkit") / "demo" / DEMO_STORE_NAME))
    if not (path / "zarr.json").is_file():
        raise DataError(f"{path}: the bundled demo store is missing; reinstall flowkit or run tools/build_demo.py")
    return path
