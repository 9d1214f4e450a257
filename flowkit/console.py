"""The one rich console flowkit prints through, and its progress bars.

Printing through `console` keeps lines above a live progress bar. When stdout is not a
terminal (a log file, CI), `Progress` falls back to plain lines every ``plain_every``
updates instead of redrawing a bar.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class Progress:
    """A progress display for ``total`` units of work with live metric fields.

    ``update(advance, **fields)`` pushes plain Python numbers (never live tensors); the
    bar shows them after the description. Use as a context manager so the bar stops on an
    exception.
    """

    def __init__(
        self,
        description: str,
        total: int | None,
        *,
        completed: int = 0,
        unit: str = "",
        plain_every: int = 1,
        enabled: bool = True,
    ) -> None:
        self.description = description
        self.total = total
        self.completed = completed
        self.unit = unit
        self.plain_every = max(1, plain_every)
        self.enabled = enabled
        self.fields: dict[str, Any] = {}
        self._rich = None
        self._task = None
        self._started = time.perf_counter()
        self._start_completed = completed
        self._updates = 0

    def __enter__(self) -> Progress:
        if self.enabled and console.is_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=16),
                MofNCompleteColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(compact=True, elapsed_when_finished=True),
                # last: on a narrow terminal the metrics fold, the bar and ETA stay whole
                TextColumn("{task.fields[info]}"),
                console=console,
                transient=False,
            )
            self._rich.__enter__()
            self._task = self._rich.add_task(
                self.description, total=self.total, completed=self.completed, info=""
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.__exit__(*exc)  # type: ignore[arg-type]
            self._rich = None

    @staticmethod
    def format_fields(fields: Mapping[str, Any]) -> str:
        """``"key value  key value"``; None values are left out, floats get 4 significant digits."""
        parts = []
        for key, value in fields.items():
            if value is None:
                continue
            if isinstance(value, float):
                text = f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
            else:
                text = str(value)
            parts.append(f"{key} {text}")
        return "  ".join(parts)

    def eta_seconds(self) -> float | None:
        """Seconds left at the rate since this display started; None before any progress or without a total."""
        done = self.completed - self._start_completed
        if self.total is None or done <= 0:
            return None
        rate = done / max(time.perf_counter() - self._started, 1e-9)
        return (self.total - self.completed) / rate

    def update(self, advance: int = 1, **fields: Any) -> None:
        """Advance by ``advance`` units and merge ``fields`` into the metrics shown."""
        self.completed += advance
        self.fields.update(fields)
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, advance=advance, info=self.format_fields(self.fields))
            return
        self._updates += 1
        if self._updates % self.plain_every == 0 or self.completed == self.total:
            info = self.format_fields(self.fields)
            total = "?" if self.total is None else str(self.total)
            eta = self.eta_seconds()
            eta_text = f"  eta {eta:.0f}s" if eta is not None else ""
            print(f"{self.description} {self.completed}/{total}  {info}{eta_text}", file=sys.stdout, flush=True)


def say(line: str) -> None:
    """One plain line on stdout through the shared console (above a live progress bar)."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


def warn(line: str) -> None:
    """One ``warning: ...`` line on stderr through the shared error console."""
    err_console.print(f"warning: {line}", markup=False, highlight=False, soft_wrap=True)
