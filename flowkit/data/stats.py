"""Per-channel latent normalisation statistics.

Computed from the training split only (validation data must not leak into training
inputs) and saved with every checkpoint, so a model always sees latents normalised as
in training. Accumulated in float64 with Chan et al.'s parallel update of Welford's
algorithm ("Updating formulae and a pairwise algorithm for computing sample variances",
1979): one pass, numerically stable over millions of frames.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from flowkit.errors import DataError

if TYPE_CHECKING:
    from flowkit.data.dataset import LatentDataset

#: floor of the std: a constant channel (e.g. a mel band at the log floor) must not divide by 0
STD_FLOOR = 1e-5


@attrs.frozen(eq=False)
class LatentStats:
    """Per-channel ``mean`` and ``std`` ``[d]`` (float64) over ``n_frames`` frames."""

    mean: np.ndarray
    std: np.ndarray
    n_frames: int
    # mean and std cast to a numpy dtype, made once (normalize_ runs once per batch item)
    _cast: dict[Any, tuple[np.ndarray, np.ndarray]] = attrs.field(init=False, factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able ``{"mean": [d], "std": [d], "n_frames"}`` (saved with every checkpoint)."""
        return {"mean": self.mean.tolist(), "std": self.std.tolist(), "n_frames": int(self.n_frames)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatentStats:
        """Stats saved by `to_dict`.

        Raises:
            ValueError: missing keys or mean/std of different lengths.
        """
        mean = np.asarray(d["mean"], dtype=np.float64)
        std = np.asarray(d["std"], dtype=np.float64)
        if mean.shape != std.shape or mean.ndim != 1:
            raise ValueError(f"latent stats: mean {mean.shape} and std {std.shape} must be equal 1-d shapes")
        return cls(mean, std, int(d["n_frames"]))

    def allclose(self, other: LatentStats, tol: float = 1e-4) -> bool:
        """Whether mean and std agree within ``tol`` (absolute and relative)."""
        return (
            self.mean.shape == other.mean.shape
            and bool(np.allclose(self.mean, other.mean, rtol=tol, atol=tol))
            and bool(np.allclose(self.std, other.std, rtol=tol, atol=tol))
        )

    def _like(self, x: Any) -> tuple[Any, Any]:
        if isinstance(x, np.ndarray):
            cast = self._cast.get(x.dtype)
            if cast is None:
                cast = self._cast[x.dtype] = (self.mean.astype(x.dtype), self.std.astype(x.dtype))
            return cast
        import torch

        return (torch.as_tensor(self.mean, dtype=x.dtype, device=x.device),
                torch.as_tensor(self.std, dtype=x.dtype, device=x.device))

    def normalize(self, x: Any) -> Any:
        """``(x - mean) / std`` over the last axis ``[... d]`` (numpy array or torch tensor)."""
        mean, std = self._like(x)
        return (x - mean) / std

    def normalize_(self, x: np.ndarray) -> np.ndarray:
        """`normalize` in place on a float32/float64 numpy array ``[... d]`` (the same
        values, without the two temporaries); returns ``x``."""
        mean, std = self._like(x)
        np.subtract(x, mean, out=x)
        np.divide(x, std, out=x)
        return x

    def denormalize(self, x: Any) -> Any:
        """``x * std + mean``, the inverse of `normalize`."""
        mean, std = self._like(x)
        return x * std + mean


def compute_latent_stats(dataset: LatentDataset, batch_segments: int = 64) -> LatentStats:
    """Per-channel mean/std ``[d]`` over every frame of ``dataset`` (open it with ``split="train"``).

    ``batch_segments`` segments are read at a time (one coalesced read each).

    Raises:
        DataError: the dataset is empty, or a segment holds non-finite values (its stored
            ``max_abs`` said otherwise: the store is damaged; raised by `LatentDataset.read`).
    """
    n_total = len(dataset)
    if n_total == 0:
        raise DataError("cannot compute latent stats of an empty dataset; check the split and the load report")
    d = int(dataset.latent_dim)
    count = 0
    mean = np.zeros(d, dtype=np.float64)
    m2 = np.zeros(d, dtype=np.float64)
    for start in range(0, n_total, batch_segments):
        indices = list(range(start, min(n_total, start + batch_segments)))
        # `LatentDataset.read` refuses non-finite latents, so none reach the sums
        for x in dataset.read(indices):
            x = x.astype(np.float64)
            n_b = x.shape[0]
            if n_b == 0:
                continue
            mean_b = x.mean(axis=0)
            m2_b = ((x - mean_b) ** 2).sum(axis=0)
            delta = mean_b - mean
            total = count + n_b
            mean = mean + delta * (n_b / total)
            m2 = m2 + m2_b + delta**2 * (count * n_b / total)
            count = total
    std = np.maximum(np.sqrt(m2 / max(count, 1)), STD_FLOOR)
    assert math.isfinite(float(std.sum()))
    return LatentStats(mean, std, count)
