"""Console logger: a rich progress bar (step/total, loss, lr, frames/s, ETA, best val loss),
or plain lines every ``every`` steps when stdout is not a terminal (log files, CI)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from flowkit.console import Progress, console
from flowkit.registry import register

__all__ = ["ConsoleLogger"]


def _label(key: str) -> str:
    return key.replace("_per_s", "/s").replace("_", " ")


@register("logger", "console")
@attrs.define
class ConsoleLogger:
    """Progress of a run on the console.

    Train records advance the bar to their ``step`` and show ``fields`` (those present);
    eval records print one line and update the best (lowest) ``best_field``; event records
    print one line: their ``event``, ``message`` and other fields.
    """

    # plain lines (not a terminal): one per N train records; the trainer already sends
    # them only every Trainer.log_every steps, so 1 prints each of those
    every: int = 1
    fields: Sequence[str] = ("loss", "lr", "frames_per_s")
    best_field: str = "val_loss_ema"  # the evaluation value whose minimum keeps best/
    _progress: Progress | None = attrs.field(init=False, default=None, repr=False)
    _step: int = attrs.field(init=False, default=0, repr=False)
    _best: float | None = attrs.field(init=False, default=None, repr=False)

    def open(self, run_dir: Path, *, resumed: bool, total_steps: int, start_step: int) -> None:
        self._step = start_step
        self._progress = Progress(
            "resume" if resumed else "train",
            total_steps,
            completed=start_step,
            unit="step",
            plain_every=self.every,
        )
        self._progress.__enter__()

    def log(self, record: Mapping[str, Any]) -> None:
        kind, step = record.get("kind"), int(record.get("step", self._step))
        if kind == "eval":
            value = record.get(self.best_field)
            if isinstance(value, (int, float)) and (self._best is None or value < self._best):
                self._best = float(value)
            values = Progress.format_fields(
                {_label(k): v for k, v in record.items() if k not in ("kind", "step")}
            )
            console.print(f"eval step {step}: {values}", markup=False, highlight=False, soft_wrap=True)
            return
        if kind == "event":
            head = " ".join(
                str(record[k]) for k in ("event", "message") if record.get(k) is not None
            )
            rest = Progress.format_fields(
                {k: v for k, v in record.items() if k not in ("kind", "step", "event", "message")}
            )
            console.print(f"step {step}: {head}  {rest}".rstrip(), markup=False, highlight=False, soft_wrap=True)
            return
        if self._progress is None:
            return
        shown = {_label(k): record[k] for k in self.fields if k in record}
        # The trainer's own best (it survives a resume) wins over the one seen here.
        best = record.get("best_val_loss")
        if isinstance(best, (int, float)):
            self._best = float(best)
        if self._best is not None:
            shown["best val"] = self._best
        self._progress.update(max(0, step - self._step), **shown)
        self._step = max(self._step, step)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.__exit__(None, None, None)
            self._progress = None
