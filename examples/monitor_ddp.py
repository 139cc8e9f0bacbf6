"""Watch rank collapse while a DDP training runs under torchrun: a script to copy.

    torchrun --standalone --nproc_per_node 2 examples/monitor_ddp.py OUT [--steps 20] [--every 5]
    rankcollapse plot-training OUT/collapse.csv

Every process trains the same small GPT-2-shaped model on its own shard of random token ids
(gloo, on the CPU); rank 0 measures a fixed held-out batch every `--every` steps into
OUT/collapse.csv, the other ranks' `monitor.step` does nothing, and no measurement joins a
collective (the monitor runs the module DDP wraps). Started again on the same OUT, the log is
refused (it holds the steps this run would write); `--resume` records them again (a run
restarted from a checkpoint). On GPUs: `init_process_group("nccl")`, the model on
`cuda:LOCAL_RANK`, `DistributedDataParallel(model, device_ids=[local_rank])`.
"""

from __future__ import annotations

import argparse
import gc
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import GPT2Config, GPT2LMHeadModel

from rankcollapse.measure.monitor import CsvLog, watch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder of collapse.csv (created if missing)")
    parser.add_argument("--steps", type=int, default=20, help="optimiser steps (default 20)")
    parser.add_argument("--every", type=int, default=5, help="steps between measurements")
    parser.add_argument("--resume", action="store_true", help="record the log's steps again")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    train(args)
    # DDP holds the process group and sits in reference cycles: collected first, the group's
    # threads end in destroy_process_group, not in the interpreter's teardown (where torch
    # aborted now and then on a loaded machine: "terminate called without an active exception").
    gc.collect()
    dist.destroy_process_group()


def train(args: argparse.Namespace) -> None:
    """This rank's training, with the monitor measuring on rank 0."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
    model = DistributedDataParallel(GPT2LMHeadModel(config))
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
    dist.barrier()  # the folder exists before any rank makes its log
    monitor = watch(model, random_tokens=True, n_samples=4, n_tokens=32, every=args.every,
                    logs=[CsvLog(args.out / "collapse.csv", resume=args.resume)])  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(64, (16 * world, 32), generator=torch.Generator().manual_seed(1))
    shard = ids[rank::world]  # this rank's data
    monitor.step(0)  # the initialisation (rank 0 measures)
    for step in range(1, args.steps + 1):
        batch = shard[(step * 4) % len(shard) :][:4]
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients over the ranks
        optimizer.step()
        monitor.step(step)
    monitor.close()
    dist.barrier()
    if rank == 0:
        print(f"wrote {args.out / 'collapse.csv'}; draw it: rankcollapse plot-training ...")


if __name__ == "__main__":
    main()
