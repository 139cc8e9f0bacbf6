"""One process of a DDP training run with the monitor (gloo, CPU), started by `torchrun`:
tests/measure/monitor/test_distributed.py checks its logs, benchmarks/bench_ddp_monitor.py times it.

    torchrun --nproc_per_node 2 tests/measure/monitor/ddp_worker.py OUT [--ranks 0|1|every|off]
        [--model san|gpt2] [--steps N] [--every K]

Writes OUT/collapse.csv (or per-rank files) and OUT/rank<r>.json: the losses and the seconds
of each training step (monitor included) of this rank.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from rankcollapse.measure.monitor import CsvLog, watch
from rankcollapse.nets import SAN, SANConfig


def build(kind: str):
    """(model, watch options, a batch of token ids per step, the loss of a batch)."""
    if kind == "san":
        config = SANConfig(inputs="tokens", vocab_size=10, n_classes=10, n_positions=6,
                           n_layers=2, d_model=8)  # fmt: skip
        model = SAN(config)
        ids = torch.randint(10, (64, 6), generator=torch.Generator().manual_seed(0))
        options = {"blocks": "body.blocks", "inputs": ids[:4], "metrics": ["mu_rel"]}

        def loss(net, batch):
            logits = net(batch)
            return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch.flatten())

        return model, options, ids, loss
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_embd=128, n_layer=4, n_head=4, vocab_size=512,
                                       n_positions=64))  # fmt: skip
    ids = torch.randint(3, 512, (256, 64), generator=torch.Generator().manual_seed(0))
    options = {"random_tokens": True, "n_samples": 8, "n_tokens": 64}
    return model, options, ids, lambda net, batch: net(input_ids=batch, labels=batch).loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", default="0")
    parser.add_argument("--model", default="san", choices=["san", "gpt2"])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--every", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    train(args)
    # DDP's reducer holds the process group, and DDP sits in reference cycles: with train's
    # locals collected first, the group's threads end in destroy_process_group. Left to the
    # interpreter's teardown, they aborted it now and then on a loaded machine ("terminate
    # called without an active exception", SIGABRT: 4 of 72 runs beside two busy processes on
    # 2 cores, with the monitor off too; 2 of 40 with the locals released but not collected).
    gc.collect()
    dist.destroy_process_group()


def train(args: argparse.Namespace) -> None:
    """This rank's training with the monitor; writes OUT/rank<r>.json."""
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model, options, ids, loss_of = build(args.model)
    ddp = DistributedDataParallel(model)
    monitor = None
    if args.ranks != "off":
        ranks = args.ranks if args.ranks == "every" else int(args.ranks)
        monitor = watch(ddp, every=args.every, logs=[CsvLog(args.out / "collapse.csv")],
                        ranks=ranks, **options)  # fmt: skip
    optimizer = torch.optim.Adam(ddp.parameters(), lr=0.01)
    shard = ids[rank::world]
    losses, seconds = [], []
    if monitor is not None:
        monitor.step(0)
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        batch = shard[(step * 8) % len(shard) :][:8]
        loss = loss_of(ddp, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if monitor is not None:
            monitor.step(step)
        seconds.append(time.perf_counter() - start)
        losses.append(float(loss.detach()))
    if monitor is not None:
        monitor.close()
    dist.barrier()
    record = {"losses": losses, "seconds": seconds}
    (args.out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
