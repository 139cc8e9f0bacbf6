"""The monitor under `torch.distributed` (DDP, `torchrun`, the Trainer or Lightning on several
processes): one rank measures (rank 0 unless told otherwise) and every other rank's
`monitor.step` does nothing, or every rank measures into its own logs (`ranks="every"`).

A measurement never joins a collective, so a rank that measures while the others go on cannot
deadlock them: a `DistributedDataParallel` wrapper is measured through the module it wraps
(its own forward may broadcast buffers, a collective), and a model whose weights are sharded
(FSDP) is refused, since its forward pass gathers them from every rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import nn

from rankcollapse.errors import ConfigError

Ranks = int | Literal["every"]


def process_rank() -> tuple[int, int] | None:
    """(rank, world size) of this process under an initialised `torch.distributed`, else
    None (a single process)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return None
    return torch.distributed.get_rank(), torch.distributed.get_world_size()


def check_ranks(ranks: Any) -> Ranks:
    """`ranks` checked once, at `watch`: a rank (int >= 0) or "every"."""
    if ranks == "every" or (isinstance(ranks, int) and not isinstance(ranks, bool) and ranks >= 0):
        return ranks
    raise ConfigError(
        f"ranks must be the rank that measures (an int >= 0, default 0) or 'every' (each "
        f"rank into its own logs), got {ranks!r}."
    )


def local_module(model: Any) -> Any:
    """The module a measurement runs: a DDP wrapper's own module (no collective); a sharded
    model (FSDP) is refused."""
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return model.module
    sharded = "FullyShardedDataParallel" in type(model).__name__
    if not sharded and isinstance(model, nn.Module) and torch.distributed.is_available():
        from torch.distributed.tensor import DTensor

        sharded = any(isinstance(p, DTensor) for p in model.parameters())
    if sharded:
        raise ConfigError(
            "this model's weights are sharded (FSDP): a forward pass gathers them from every "
            "rank, so one rank cannot measure alone. Watch it under DDP or in one process, or "
            "measure saved checkpoints with `rankcollapse probe`."
        )
    return model


def logs_of_rank(logs: Sequence[Any], ranks: Ranks) -> list[Any] | None:
    """The logs this process writes: all of them in a single process or on the measuring
    rank, each log's own per-rank copy (`log.for_rank(rank)`) with `ranks="every"`, None on
    a rank that does not measure."""
    here = process_rank()
    if here is None:
        return list(logs)
    rank, world = here
    if ranks == "every":
        split = []
        for log in logs:
            if not hasattr(log, "for_rank"):
                raise ConfigError(
                    f"a {type(log).__name__} cannot be split per rank; measure on one rank "
                    "(ranks=0) or give every rank a CsvLog, TensorBoardLog or MemoryLog."
                )
            split.append(log.for_rank(rank))
        return split
    if ranks >= world:
        raise ConfigError(
            f"ranks={ranks} but this run has {world} processes (ranks 0 to {world - 1}); "
            "pass one of those."
        )
    return list(logs) if rank == ranks else None
