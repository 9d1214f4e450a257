"""Weights & Biases logger: numeric fields as ``<kind>/<name>`` at their step.

Offline by default: the run is written under ``<run_dir>/wandb/offline-run-*`` and can be
uploaded later with ``wandb sync``; nothing touches the network unless ``mode="online"``.
Needs the ``wandb`` package (``pip install 'flowkit[wandb]'``), imported only when used.
The W&B run id is kept in ``<run_dir>/wandb/flowkit_run_id`` so a resumed flowkit run
continues the same W&B run.
"""

from __future__ import annotations

import importlib.util
import secrets
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import ConfigError
from flowkit.io import atomic_write_text
from flowkit.loggers.records import scalar_fields
from flowkit.registry import register

__all__ = ["WandbLogger"]

_MISSING = "logger.wandb needs the wandb package: pip install 'flowkit[wandb]'"
MODES = ("offline", "online", "disabled")


@register("logger", "wandb")
@attrs.define
class WandbLogger:
    """Metrics to a W&B run (``project``, ``name``), offline unless told otherwise.

    Raises:
        ConfigError: wandb is not installed (names the extra), or an unknown ``mode``.
    """

    project: str = "flowkit"
    name: str | None = None  # None: the run directory's name
    mode: str = "offline"  # "offline" | "online" | "disabled"
    entity: str | None = None  # W&B team or user; None: the account default
    tags: Sequence[str] = ()
    _run: Any = attrs.field(init=False, default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"logger.wandb.mode={self.mode!r}: use one of {', '.join(MODES)}")
        if importlib.util.find_spec("wandb") is None:
            raise ConfigError(_MISSING)

    def open(self, run_dir: Path, *, resumed: bool, total_steps: int, start_step: int) -> None:
        try:
            import wandb
        except ImportError:
            raise ConfigError(_MISSING) from None
        run_dir = Path(run_dir)
        id_file = run_dir / "wandb" / "flowkit_run_id"
        if id_file.is_file():
            run_id = id_file.read_text(encoding="utf-8").strip()
        else:
            # W&B run ids are short lowercase alphanumerics.
            run_id = "".join(
                secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8)
            )
            atomic_write_text(id_file, run_id + "\n")
        self._run = wandb.init(
            project=self.project,
            name=self.name or run_dir.name,
            entity=self.entity,
            tags=list(self.tags),
            dir=str(run_dir),
            mode=self.mode,
            id=run_id,
            resume="allow",
            config={"total_steps": total_steps, "start_step": start_step, "resumed": resumed},
        )

    def log(self, record: Mapping[str, Any]) -> None:
        data = dict(scalar_fields(record))
        if data:
            self._run.log(data, step=int(record.get("step", 0)))

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None
