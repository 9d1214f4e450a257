"""A stop request: SIGTERM and Ctrl-C raise a flag that the training loop polls between
steps, so the step in flight finishes and the run saves before it exits."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["StopFlag"]


class StopFlag:
    """Set by SIGTERM / Ctrl-C; the loop polls it between steps."""

    def __init__(self) -> None:
        self.signal: int | None = None

    @property
    def requested(self) -> bool:
        return self.signal is not None

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopFlag]:
        """Route SIGTERM and SIGINT to the flag (main thread only); a second Ctrl-C aborts."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return

        def handler(signum: int, frame: object) -> None:
            if signum == signal.SIGINT and self.signal == signal.SIGINT:
                raise KeyboardInterrupt
            self.signal = signum

        previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield self
        finally:
            for s, h in previous.items():
                signal.signal(s, h)
