"""TensorBoard logger: every numeric field as a scalar ``<kind>/<name>`` at its step.

Needs the ``tensorboard`` package (``pip install 'flowkit[tensorboard]'``), imported only
when a run uses this logger.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from flowkit.errors import ConfigError
from flowkit.loggers.records import scalar_fields
from flowkit.registry import register

__all__ = ["TensorBoardLogger"]

_MISSING = "logger.tensorboard needs the tensorboard package: pip install 'flowkit[tensorboard]'"


@register("logger", "tensorboard")
@attrs.define
class TensorBoardLogger:
    """Scalars to ``<run_dir>/<subdir>`` (event files for ``tensorboard --logdir``).

    On resume, events after the resumed step are purged (``purge_step``) so the replayed
    steps do not appear twice.

    Raises:
        ConfigError: tensorboard is not installed (names the extra to install).
    """

    subdir: str = "tensorboard"
    flush_secs: int = 30  # seconds between flushes of the event file
    _writer: Any = attrs.field(init=False, default=None, repr=False)

    def __attrs_post_init__(self) -> None:
        # Fail when the config is built, not after the data and model are ready.
        if importlib.util.find_spec("tensorboard") is None:
            raise ConfigError(_MISSING)

    def open(self, run_dir: Path, *, resumed: bool, total_steps: int, start_step: int) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ConfigError(_MISSING) from None
        self._writer = SummaryWriter(
            log_dir=str(Path(run_dir) / self.subdir),
            purge_step=start_step + 1 if resumed else None,
            flush_secs=self.flush_secs,
        )

    def log(self, record: Mapping[str, Any]) -> None:
        step = int(record.get("step", 0))
        for tag, value in scalar_fields(record):
            self._writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
