"""The errors flowkit raises for a user's mistake.

Every `FlowkitError` is one line that names the file, field or value at fault and the
fix. The CLI prints it without a traceback (``--debug`` shows one) and exits with
`FlowkitError.exit_code`. Anything else escaping the CLI is a bug in flowkit.
"""

from __future__ import annotations


class FlowkitError(Exception):
    """Base of every user-facing error; its message is one line with the fix."""

    exit_code = 1


class RegistryError(FlowkitError):
    """Unknown kind or component name, a duplicate registration, or a plugin that fails."""

    exit_code = 2


class ConfigError(FlowkitError):
    """A gin file or binding that cannot be parsed or applied."""

    exit_code = 2


class DataError(FlowkitError):
    """A store or input that cannot be read as flowkit data."""

    exit_code = 3


class ResumeError(FlowkitError):
    """A run directory that cannot be resumed (or started) as asked."""

    exit_code = 4


class CheckpointError(FlowkitError):
    """A checkpoint that is missing, corrupt, or does not fit the model."""

    exit_code = 4


class TrainingError(FlowkitError):
    """Training stopped: non-finite loss or gradient, a full disk, a busy run directory."""

    exit_code = 5


class WriteError(FlowkitError):
    """An output the file system refuses: read-only, full, over quota, or not permitted.

    Raised by every command that writes (`flowkit.io.check_writable`, `flowkit.io.refused_writes`);
    nothing half-written is left behind. Training's own full disk stays a `TrainingError`.
    """

    exit_code = 6
