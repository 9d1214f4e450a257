"""flowkit: declarative flow-matching text-to-speech training.

Importing flowkit is cheap: nothing (not even the registry, which reads package metadata)
is imported until it is used, so ``flowkit --help`` starts fast. Public API: `register`
(make a component a plugin), `FlowkitError`, and the modules `flowkit.registry` and
`flowkit.config`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["FlowkitError", "__version__", "register"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from flowkit.errors import FlowkitError
    from flowkit.registry import register


def __getattr__(name: str) -> Any:
    if name == "register":
        from flowkit.registry import register

        return register
    if name == "FlowkitError":
        from flowkit.errors import FlowkitError

        return FlowkitError
    raise AttributeError(f"module 'flowkit' has no attribute {name!r}")
