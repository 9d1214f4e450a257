"""Frame-budget batching: variable-size batches of similar-length segments.

The model packs the items of a batch into rows (``row_frames``, `flowkit.model.packing`),
so the transformer spends nothing on padding whatever the lengths; the input stage and the
loss still run on a padded ``[b n]`` batch, where grouping by length keeps the padding
small. Sorting the whole dataset would make every epoch see the same batches in the same
order. The compromise used by F5-TTS-style trainers, and here:

1. shuffle all items with a generator derived from ``(seed, stream, epoch)``;
2. cut the shuffled order into *pools* of about ``pool_size`` batches' worth of frames;
3. sort each pool by length and fill batches greedily up to ``frame_budget`` (and at most
   ``max_items`` items);
4. shuffle the batch order of the whole epoch.

Under torch.distributed the epoch's global batch list is dealt round-robin to the ranks
(batch ``k`` goes to rank ``k % world_size``). So that every rank runs the same number of
steps (a rank that runs out first would hang the others in the next all-reduce), the
global list is padded to a multiple of ``world_size`` by repeating its first batches;
``EpochPlan.padded`` counts those repeats. No batch is ever dropped, so every item is seen
at least once per epoch on some rank, and at most ``world_size - 1`` batches are seen twice.

A position ``(epoch, batch)`` identifies the next batch of a rank; since an epoch's plan is
a pure function of ``(lengths, seed, stream, epoch, rank, world_size)``, restoring the
position resumes the exact batch sequence (`BatchStream`).

Units: lengths and budgets are latent frames.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import numpy as np

from flowkit.errors import ConfigError, DataError, ResumeError
from flowkit.registry import register

__all__ = [
    "BatchStream",
    "BudgetError",
    "EpochPlan",
    "FrameBudget",
    "SamplerPosition",
    "stream_rng",
]


class BudgetError(DataError):
    """An item whose cost alone exceeds the batch frame budget."""


def stream_rng(seed: int, stream: str, epoch: int) -> np.random.Generator:
    """A NumPy generator owned by ``(seed, stream, epoch)`` and by nothing else.

    The stream name is hashed (not Python's salted ``hash``) so the generator is the same
    in every process and every Python version; the global NumPy RNG is never touched.
    """
    name_key = int.from_bytes(hashlib.sha256(stream.encode("utf-8")).digest()[:8], "little")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, name_key, epoch])))


@attrs.frozen
class EpochPlan:
    """The batches of one epoch for one rank.

    Attributes:
        epoch: the epoch this plan is for.
        batches: item indices of each batch of this rank, in order.
        rejected: indices of items left out for exceeding the budget
            (only with ``on_oversize="reject"``; sorted).
        padded: batches repeated (whole epoch, all ranks) to give every rank the same count.
        num_global_batches: batches of the epoch across all ranks, before padding.
    """

    epoch: int
    batches: list[list[int]]
    rejected: list[int] = attrs.Factory(list)
    padded: int = 0
    num_global_batches: int = 0


@register("batch_sampler", "frame_budget")
@attrs.frozen
class FrameBudget:
    """Length-bucketed batches filled up to a frame budget (see the module docstring).

    The cost of an item of ``n`` frames is ``n`` (``cost="linear"``: padding-free frame
    count, what the feed-forward layers pay) or ``n * max(1, n / quadratic_ref_frames)``
    (``cost="quadratic"``: beyond ``quadratic_ref_frames`` the attention matrix, which
    grows as ``n**2``, dominates memory, so long items count for more than their frames).
    Both costs equal ``n`` for short items, so the budget keeps its meaning in frames.

    Raises:
        ConfigError: a non-positive size or an unknown ``cost`` / ``on_oversize``.
    """

    # F5-TTS trains with 38,400 mel frames per GPU (24 kHz, hop 256: about 410 s of audio
    # per batch on an 80 GB card); scale it with the memory of your device and frame rate.
    frame_budget: int = 38_400
    # F5-TTS caps a batch at 64 items; many short items cost more than their frames say.
    max_items: int = 64
    # Batches' worth of items sorted together: larger pools pad less, smaller ones keep
    # more randomness in which items meet in a batch.
    pool_size: int = 100
    cost: Literal["linear", "quadratic"] = "linear"  # "linear" | "quadratic"
    # Length (frames) from which attention dominates memory in the quadratic cost.
    quadratic_ref_frames: int = 1024
    on_oversize: Literal["error", "reject"] = "error"  # "error" | "reject"
    # Rows the model packs a batch into (flowkit.model.packing): None puts every item of a
    # batch in one row, no padding at all (variable-length attention, per-item kernels on
    # the CPU); a length (e.g. 4096) gives rows of about that many frames for kernels that
    # want fixed shapes. The budget counts real frames either way.
    row_frames: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.frame_budget <= 0:
            raise ConfigError(
                f"batch_sampler.frame_budget.frame_budget={self.frame_budget} must be > 0"
            )
        if self.max_items <= 0:
            raise ConfigError(f"batch_sampler.frame_budget.max_items={self.max_items} must be > 0")
        if self.pool_size <= 0:
            raise ConfigError(f"batch_sampler.frame_budget.pool_size={self.pool_size} must be > 0")
        if self.cost not in ("linear", "quadratic"):
            raise ConfigError(
                f"batch_sampler.frame_budget.cost={self.cost!r}: use 'linear' or 'quadratic'"
            )
        if self.quadratic_ref_frames <= 0:
            raise ConfigError(
                f"batch_sampler.frame_budget.quadratic_ref_frames={self.quadratic_ref_frames} "
                "must be > 0"
            )
        if self.row_frames is not None and self.row_frames <= 0:
            raise ConfigError(
                f"batch_sampler.frame_budget.row_frames={self.row_frames} must be > 0, or None for one row"
            )
        if self.on_oversize not in ("error", "reject"):
            raise ConfigError(
                f"batch_sampler.frame_budget.on_oversize={self.on_oversize!r}: use 'error' or "
                "'reject'"
            )

    def item_costs(self, lengths: np.ndarray) -> np.ndarray:
        """Budget cost of each item, float64 ``[N]``, from its length in frames ``[N]``."""
        n = np.asarray(lengths, dtype=np.float64)
        if self.cost == "linear":
            return n
        return n * np.maximum(1.0, n / self.quadratic_ref_frames)

    def epoch_batches(
        self,
        lengths: np.ndarray,
        seed: int,
        epoch: int,
        *,
        rank: int = 0,
        world_size: int = 1,
        stream: str = "train",
    ) -> EpochPlan:
        """The batches of ``epoch`` for ``rank``.

        Args:
            lengths: int64 ``[N]``, frames each item occupies (including frames a pairing
                reserves for a prompt, see ``Pairing.budget_lengths``).
            seed: the run seed; ``stream`` separates e.g. training and validation batching.
            epoch: 0-based epoch; each epoch has its own shuffle.
            rank, world_size: this process's place under torch.distributed.

        Raises:
            BudgetError: an item costs more than ``frame_budget`` (``on_oversize="error"``).
            DataError: ``lengths`` is not a 1-D array of non-negative integers, or bad
                ``rank``/``world_size``.
        """
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer) or (lengths < 0).any():
            raise DataError(
                f"batch lengths must be a 1-D array of non-negative integer frame counts, got "
                f"dtype {lengths.dtype} shape {lengths.shape}"
            )
        if world_size < 1 or not 0 <= rank < world_size:
            raise DataError(f"rank {rank} is not in [0, world_size={world_size})")
        costs = self.item_costs(lengths)
        over = np.flatnonzero(costs > self.frame_budget)
        if over.size and self.on_oversize == "error":
            i = int(over[0])
            raise BudgetError(
                f"item {i} has {int(lengths[i])} frames (cost {costs[i]:.0f}), more than "
                f"batch_sampler.frame_budget.frame_budget={self.frame_budget} "
                f"({over.size} such item(s)); raise frame_budget, lower the data's max_frames, "
                "or set batch_sampler.frame_budget.on_oversize='reject'"
            )
        keep = np.ones(lengths.shape[0], dtype=bool)
        keep[over] = False

        rng = stream_rng(seed, stream, epoch)
        order = np.flatnonzero(keep)[rng.permutation(int(keep.sum()))]
        batches: list[list[int]] = []
        pool_frames = self.pool_size * float(self.frame_budget)
        pool_items = self.pool_size * self.max_items
        cum = np.cumsum(costs[order])
        start = 0
        while start < order.size:
            # A pool ends once it holds pool_size batches' worth of cost or of items.
            before = cum[start - 1] if start else 0.0
            stop = int(np.searchsorted(cum, before + pool_frames, side="left")) + 1
            stop = min(stop, start + pool_items, order.size)
            batches.extend(self._fill(order[start:stop], lengths, costs))
            start = stop
        batches = [batches[k] for k in rng.permutation(len(batches))]

        n_global = len(batches)
        padded = (-n_global) % world_size if n_global else 0
        batches = batches + [list(batches[k % n_global]) for k in range(padded)]
        return EpochPlan(
            epoch=epoch,
            batches=batches[rank::world_size],
            rejected=[int(i) for i in over] if self.on_oversize == "reject" else [],
            padded=padded,
            num_global_batches=n_global,
        )

    def _fill(self, pool: np.ndarray, lengths: np.ndarray, costs: np.ndarray) -> list[list[int]]:
        """Greedy fill of one pool sorted by length (stable: ties keep the shuffled order).

        A batch takes items while its running cost stays within ``frame_budget`` and it
        has fewer than ``max_items`` (its first item always). Done a batch at a time: the
        running cost of a batch is ``np.cumsum`` of its candidates' costs, the same
        left-to-right float additions as an item-by-item loop, so the batches are exactly
        those of that loop, at a cost per batch instead of per item (1M items: ~15k batches).
        """
        pool = pool[np.argsort(lengths[pool], kind="stable")]
        pool_costs = costs[pool]
        out: list[list[int]] = []
        start, n = 0, pool.shape[0]
        while start < n:
            running = np.cumsum(pool_costs[start : start + self.max_items])
            take = max(1, int(np.searchsorted(running, self.frame_budget, side="right")))
            out.append(pool[start : start + take].tolist())
            start += take
        return out


@attrs.frozen
class SamplerPosition:
    """The next batch of a rank: ``batch`` is its index in epoch ``epoch``'s plan."""

    epoch: int = 0
    batch: int = 0


class BatchStream:
    """An endless stream of batches across epochs, with an exact resumable position.

    ``next()`` returns ``(position_before, indices)``; ``position`` is always the position
    of the batch that ``next()`` will return, normalised so that ``batch`` is inside its
    epoch's plan. Only the position is state: each epoch's plan is recomputed on demand.
    """

    def __init__(
        self,
        sampler: FrameBudget,
        lengths: np.ndarray,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        *,
        stream: str = "train",
    ) -> None:
        self.sampler = sampler
        self.lengths = np.asarray(lengths)
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.stream = stream
        self._position = SamplerPosition(0, 0)
        self._plan: EpochPlan | None = None

    def plan(self, epoch: int) -> EpochPlan:
        """This rank's plan of ``epoch`` (cached for the current epoch).

        Raises:
            DataError: the epoch has no batch (no item, or every item rejected).
        """
        if self._plan is None or self._plan.epoch != epoch:
            plan = self.sampler.epoch_batches(
                self.lengths,
                self.seed,
                epoch,
                rank=self.rank,
                world_size=self.world_size,
                stream=self.stream,
            )
            if not plan.batches:
                raise DataError(
                    f"batch stream {self.stream!r} has no batch in epoch {epoch}: "
                    f"{self.lengths.size} item(s), {len(plan.rejected)} rejected as oversize; "
                    "add data or raise batch_sampler.frame_budget.frame_budget"
                )
            self._plan = plan
        return self._plan

    @property
    def position(self) -> SamplerPosition:
        return self._position

    def next(self) -> tuple[SamplerPosition, list[int]]:
        """The next batch's ``(position, item indices)``; advances the position."""
        before = self._position
        plan = self.plan(before.epoch)
        indices = list(plan.batches[before.batch])
        after = SamplerPosition(before.epoch, before.batch + 1)
        if after.batch >= len(plan.batches):
            after = SamplerPosition(before.epoch + 1, 0)
        self._position = after
        return before, indices

    def __iter__(self) -> BatchStream:
        return self

    def __next__(self) -> tuple[SamplerPosition, list[int]]:
        return self.next()

    def state_dict(self) -> dict[str, Any]:
        """``{"epoch", "batch", "stream"}``: plain ints/str, for a checkpoint."""
        return {"epoch": self._position.epoch, "batch": self._position.batch, "stream": self.stream}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a saved position.

        Raises:
            ResumeError: a malformed state, another stream, or a batch index past the end
                of its epoch (the data, the budget or the world size changed).
        """
        try:
            epoch, batch = int(state["epoch"]), int(state["batch"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ResumeError(f"bad batch sampler state {dict(state)!r}: {exc}") from None
        if state.get("stream", self.stream) != self.stream:
            raise ResumeError(
                f"batch sampler state is for stream {state['stream']!r}, not {self.stream!r}"
            )
        if epoch < 0 or batch < 0:
            raise ResumeError(f"bad batch sampler position epoch={epoch} batch={batch}")
        n = len(self.plan(epoch).batches)
        if batch >= n:
            raise ResumeError(
                f"batch sampler position batch {batch} of epoch {epoch} is past the epoch's "
                f"{n} batches on rank {self.rank}/{self.world_size}: the data, the batch "
                "settings or the world size changed since the checkpoint"
            )
        self._position = SamplerPosition(epoch, batch)
