"""What synthesis needs from a run, recorded in every checkpoint's ``meta.json``.

Synthesis (`flowkit.synth.inference`) must work where the training stack is not
installed (a run logged to wandb, synthesised on a laptop without wandb), so it never
re-parses the run's config. Instead each checkpoint carries, under ``meta["synthesis"]``,
the components it needs as records ``{"name", "params"}`` (`flowkit.registry.record_of`)::

    {"schedule": {"name": "flow_matching", "params": {"sigma_min": 0.0}},
     "solver": {"name": "euler", "params": {}},
     "text": {"name": "chars", "params": {}}}

(The stores' encoder record and the run's vocoder travel beside it, as ``meta["encoder"]``
and ``meta["vocoder"]``: `flowkit.data.encoder_records`.) A new entry is one more key
here and one more read in `flowkit.synth.inference`.
"""

from __future__ import annotations

from typing import Any

from flowkit import registry

__all__ = ["SYNTHESIS_KEY", "synthesis_meta"]

SYNTHESIS_KEY = "synthesis"


def synthesis_meta(settings: Any) -> dict[str, Any]:
    """The ``meta["synthesis"]`` record of a run's `flowkit.train.settings.Trainer` (see the
    module docstring)."""
    return {
        "schedule": registry.record_of(settings.schedule),
        "solver": registry.record_of(settings.solver),
        "text": registry.record_of(settings.text),
    }
