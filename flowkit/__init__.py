"""flowkit: declarative flow-matching text-to-speech training.

Importing flowkit is cheap (no torch, gin or zarr): the CLI's ``--help`` relies on it.
Public API: `register` (make a component a plugin), `flowkit.registry`, `flowkit.config`.
"""

from flowkit.errors import FlowkitError
from flowkit.registry import register

__all__ = ["FlowkitError", "__version__", "register"]
__version__ = "0.1.0"
