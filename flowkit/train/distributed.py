"""torch.distributed for training: the process group, rank helpers and the few collectives.

A run is distributed when ``torchrun`` (``python -m torch.distributed.run``) started it:
torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``,
and `setup` joins the process group from them (``env://``). flowkit never spawns or
supervises processes itself; ``flowkit train --nproc N`` only re-executes the same command
under torchrun (see docs/distributed.md).

Backends: gloo on the CPU; on CUDA ``cpu:gloo,cuda:nccl``, so gradients and device tensors
go through NCCL while the small CPU collectives (unit counts, stop flag, the objects of a
checkpoint) go through gloo without a device round trip. Every collective honours the
process-group timeout (``Trainer.dist_timeout_s``): a rank that dies or hangs makes the
others fail with a `TrainingError` naming their rank, instead of waiting forever.

With one process (no torchrun, or ``WORLD_SIZE=1``) every helper is a no-op and no
process group is created.
"""

from __future__ import annotations

import copy
import datetime
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
import torch
import torch.distributed as dist

from flowkit.errors import ConfigError, FlowkitError, TrainingError

__all__ = [
    "DistContext",
    "all_sum",
    "any_rank",
    "broadcast_object",
    "env_rank",
    "gather_objects",
    "launched_by_torchrun",
    "name_rank_in_errors",
    "setup",
    "teardown",
    "wrap_model",
]

_F = TypeVar("_F", bound=Callable[..., Any])


@attrs.frozen
class DistContext:
    """Where this process stands: ``rank`` in ``[0, world_size)``; rank 0 writes the run."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None
    timeout_s: float | None = None

    @property
    def enabled(self) -> bool:
        """True with a process group of two or more processes."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """True when the torchrun environment variables are set."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def env_rank() -> int | None:
    """This process's rank from torchrun's environment, or None outside torchrun."""
    if not launched_by_torchrun():
        return None
    try:
        return int(os.environ["RANK"])
    except ValueError:
        return None


def _env_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise ConfigError(f"torchrun variable {name} is not set; launch with torchrun or flowkit train --nproc N")
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r} is not an integer (torchrun sets it)") from None


def setup(device: torch.device, *, timeout_s: float) -> tuple[DistContext, torch.device]:
    """Join the process group torchrun describes; returns the context and this rank's device.

    On CUDA each process takes ``cuda:LOCAL_RANK`` (an explicit ``cuda:N`` is kept). Without
    torchrun, or with ``WORLD_SIZE=1``, nothing is initialised.

    Raises:
        ConfigError: malformed torchrun variables, or a distributed build of torch missing.
        TrainingError: the other processes did not join within ``timeout_s`` seconds.
    """
    if not launched_by_torchrun():
        return DistContext(), device
    rank, world_size = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank = _env_int("LOCAL_RANK", 0)
    if world_size <= 1:
        return DistContext(), device
    if not dist.is_available():
        raise ConfigError("this torch build has no torch.distributed; install a standard torch wheel")
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "cpu:gloo,cuda:nccl"
    else:
        backend = "gloo"
    try:
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    except (dist.DistError, RuntimeError) as exc:
        raise TrainingError(
            f"rank {rank}: could not join the process group of {world_size} processes at "
            f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')} ({_first_line(exc)}); "
            "check the torchrun rendezvous options and that every node can reach rank 0"
        ) from exc
    return DistContext(rank, world_size, local_rank, backend, timeout_s), device


def teardown(ctx: DistContext, *, ok: bool) -> None:
    """Leave the process group; after a clean run, wait for rank 0 to finish writing first."""
    if not ctx.enabled or not dist.is_initialized():
        return
    try:
        if ok:
            dist.barrier()
    finally:
        dist.destroy_process_group()


def wrap_model(ctx: DistContext, model: torch.nn.Module, device: torch.device, *,
               find_unused_parameters: bool = False) -> torch.nn.Module:
    """``model`` in `DistributedDataParallel` (gradients averaged across ranks), or itself.

    DDP broadcasts rank 0's weights at construction, so every rank starts identical even
    after a resume. The unwrapped module stays the one the EMA, evaluation and checkpoints use.
    """
    if not ctx.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=find_unused_parameters)


def all_sum(ctx: DistContext, values: Sequence[float]) -> list[float]:
    """Sum each of ``values`` over the ranks (float64 on the CPU, one all-reduce)."""
    if not ctx.enabled:
        return [float(v) for v in values]
    tensor = torch.tensor([float(v) for v in values], dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def any_rank(ctx: DistContext, flag: bool) -> bool:
    """True on every rank when ``flag`` is True on any rank (one all-reduce; the flag itself
    with one process)."""
    if not ctx.enabled:
        return flag
    return all_sum(ctx, [float(flag)])[0] > 0


def all_mean_(ctx: DistContext, tensor: torch.Tensor) -> torch.Tensor:
    """Average ``tensor`` over the ranks in place (on its own device) and return it."""
    if ctx.enabled:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= ctx.world_size
    return tensor


def gather_objects(ctx: DistContext, obj: Any) -> list[Any]:
    """``[obj of rank 0, obj of rank 1, ...]`` on every rank (picklable objects)."""
    if not ctx.enabled:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(ctx: DistContext, obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank; the other ranks block here until rank 0 sends it."""
    if not ctx.enabled:
        return obj
    box = [obj if ctx.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _is_collective_failure(exc: BaseException) -> bool:
    if isinstance(exc, dist.DistError):
        return True
    # gloo reports a vanished peer or a timeout as a plain RuntimeError.
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(
        marker in text
        for marker in ("Gloo", "gloo", "Connection closed", "Connection reset", "NCCL", "Timed out", "timed out")
    )


def name_rank_in_errors(fn: _F) -> _F:
    """Under torchrun, make every error of ``fn`` say which rank it happened on.

    - A lost collective (a peer died, or hung past the timeout) becomes a `TrainingError`
      ``"rank R: lost contact with the other ranks ..."``.
    - A `FlowkitError` keeps its type and exit code, its message prefixed ``"rank R failed: "``.
    - Anything else is reported as ``"rank R failed: ..."`` on stderr, then re-raised.

    Each way the process exits non-zero, and torchrun stops the other ranks.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rank = env_rank()
        if rank is None or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except FlowkitError as exc:
            if str(exc).startswith(f"rank {rank}"):
                raise
            renamed = copy.copy(exc)
            renamed.args = (f"rank {rank} failed: {exc}",)
            raise renamed from exc
        except Exception as exc:
            if _is_collective_failure(exc):
                raise TrainingError(
                    f"rank {rank}: lost contact with the other ranks ({_first_line(exc)}); another rank "
                    "failed or hung (see its 'rank N failed' line) — the last checkpoint is intact; "
                    "raise Trainer.dist_timeout_s if a rank is only slow (e.g. a long evaluation)"
                ) from exc
            print(f"rank {rank} failed: {_first_line(exc)}", file=sys.stderr, flush=True)
            raise

    return wrapper  # type: ignore[return-value]
