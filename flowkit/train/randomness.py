"""One seed, several independent random streams, and their capture for checkpoints.

A run has one integer seed. It seeds the global Python, numpy and torch generators (they
only serve model initialisation) and derives named streams that never share state:

- ``data``: numpy ``Generator`` for target spans, cross-segment pairing and CFG dropout;
- ``flow``: CPU ``torch.Generator`` for the flow time t and the noise x0 (drawn on the CPU
  so a run gives the same draws on any device);
- ``eval/<name>``: generators recreated at every evaluation, so successive evaluations
  see identical spans, t and noise and never disturb the training streams.

Streams are derived with numpy's ``SeedSequence`` from ``(seed, crc32(name), rank)``, so
adding a stream later never shifts the draws of an existing one, and ranks differ.
`RandomStreams.capture` / `restore` cover every generator above plus the global ones; a
checkpoint holds the capture, which is what makes resume bit-identical.
"""

from __future__ import annotations

import random
import zlib
from typing import Any

import attrs
import numpy as np
import torch

__all__ = ["RandomStreams", "derive_seed", "eval_generators", "seed_globals"]


def derive_seed(seed: int, name: str, rank: int = 0) -> int:
    """A 63-bit seed for stream ``name`` of ``rank``, independent of every other name."""
    sequence = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, zlib.crc32(name.encode()), rank])
    # 63 bits: torch.Generator.manual_seed accepts any int64, numpy anything non-negative.
    return int(sequence.generate_state(1, dtype=np.uint64)[0]) >> 1


def seed_globals(seed: int) -> None:
    """Seed Python's, numpy's legacy and torch's (CPU and CUDA) global generators."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def eval_generators(seed: int, name: str) -> tuple[np.random.Generator, torch.Generator]:
    """Fresh ``(numpy, CPU torch)`` generators for evaluation pass ``name``; the same every call."""
    value = derive_seed(seed, f"eval/{name}")
    return np.random.default_rng(value), torch.Generator().manual_seed(value)


def _numpy_legacy_state() -> dict[str, Any]:
    name, keys, pos, has_gauss, cached = np.random.get_state()
    # Plain lists and ints: checkpoints load with torch.load(weights_only=True).
    return {"name": name, "keys": keys.tolist(), "pos": int(pos), "has_gauss": int(has_gauss), "cached": float(cached)}


def _set_numpy_legacy_state(state: dict[str, Any]) -> None:
    keys = np.asarray(state["keys"], dtype=np.uint32)
    np.random.set_state((state["name"], keys, state["pos"], state["has_gauss"], state["cached"]))


@attrs.define
class RandomStreams:
    """The training streams of one rank: ``data`` (numpy) and ``flow`` (CPU torch).

    Build with `RandomStreams.create`; ``capture()`` returns a plain structure of ints,
    lists and tensors (safe for ``torch.load(weights_only=True)``).
    """

    seed: int
    rank: int
    data: np.random.Generator
    flow: torch.Generator

    @classmethod
    def create(cls, seed: int, rank: int = 0) -> RandomStreams:
        data = np.random.default_rng(derive_seed(seed, "data", rank))
        flow = torch.Generator().manual_seed(derive_seed(seed, "flow", rank))
        return cls(seed=seed, rank=rank, data=data, flow=flow)

    def capture(self) -> dict[str, Any]:
        """States of the training streams and of every global generator."""
        state: dict[str, Any] = {
            "seed": self.seed,
            "rank": self.rank,
            "data": self.data.bit_generator.state,
            "flow": self.flow.get_state(),
            "python": _python_state(),
            "numpy": _numpy_legacy_state(),
            "torch": torch.get_rng_state(),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Put every generator back to a `capture`; raises KeyError for a missing part."""
        self.data.bit_generator.state = state["data"]
        self.flow.set_state(state["flow"])
        _set_python_state(state["python"])
        _set_numpy_legacy_state(state["numpy"])
        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])


def _python_state() -> dict[str, Any]:
    version, internal, gauss = random.getstate()
    return {"version": version, "internal": list(internal), "gauss": gauss}


def _set_python_state(state: dict[str, Any]) -> None:
    random.setstate((state["version"], tuple(state["internal"]), state["gauss"]))
