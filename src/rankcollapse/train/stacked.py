"""Train many copies of one small module (own weights, own batch order) as one batched model.

`train_stacked` is `rankcollapse.train.loop.train` for U models of one architecture that
differ only in their weights (e.g. their seeds), each with its own `TrainConfig` differing only
in `seed` (the order of its mini-batches). Their parameters are stacked on a leading axis
(`torch.func.stack_module_state`) and the module's own forward runs over that axis
(`torch.func.vmap` of `torch.func.functional_call`), so one forward, one backward and one
Adam step (`train.grid.StackedAdamW`, kept per model) serve all U:

    loss_u = L(f(theta_u; x[order_u[batch]]), y[order_u[batch]]),   backward of sum_u loss_u

The sum sends each model's gradient to its own slice only, so model u ends where `train`
alone ends it (the same schedule, batch order and loss), up to float rounding
(tests/train/test_stacked.py). A tiny model's step is overhead-bound, so U of them cost
about what one costs until the arithmetic dominates (benchmarks/bench_stacked.py).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, stack_module_state, vmap

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.train.grid import StackedAdamW, TrainSettings
from rankcollapse.train.loop import TrainConfig, loss_function

ADAM = TrainSettings(betas=(0.9, 0.999), eps=1e-8)  # torch.optim.Adam's, as `train` uses


def train_stacked(
    models: Sequence[nn.Module],
    inputs: Tensor,
    targets: Tensor,
    configs: Sequence[TrainConfig],
    *,
    device: torch.device | str = "cpu",
) -> list[list[float]]:
    """Train `models[u]` in place as `train(models[u], inputs, targets, configs[u])` would,
    all at once; return each model's per-step losses.

    The configs must be equal but for `seed`; the models must share one architecture (the
    same parameter names and shapes) and have no active dropout (its draws would differ from
    a model's alone). The models end on `device`, in eval mode.

    Example:
        >>> models = [nn.Linear(2, 2) for _ in range(3)]
        >>> x, y = torch.randn(16, 2), torch.zeros(16, 2)
        >>> configs = [TrainConfig(steps=20, lr=0.1, loss="mse", seed=s) for s in range(3)]
        >>> losses = train_stacked(models, x, y, configs)
        >>> len(losses), all(run[-1] < run[0] for run in losses)
        (3, True)
    """
    _check_stack(models, inputs, targets, configs)
    device = torch.device(device)
    config = configs[0]
    inputs, targets = inputs.to(device), targets.to(device)
    for model in models:
        model.to(device).train()
    params, buffers = stack_module_state(list(models))
    skeleton = copy.deepcopy(models[0]).to("meta")
    forward = vmap(lambda p, b, x: functional_call(skeleton, (p, b), (x,)))
    per_model_loss = vmap(loss_function(config.loss))
    owner = torch.arange(len(models), device=device)
    optimizer = StackedAdamW([(p, owner) for p in params.values()], len(models), ADAM)
    generators = [torch.Generator().manual_seed(c.seed) for c in configs]
    batch_size = min(config.batch_size, len(inputs))
    order = torch.empty(len(models), 0, dtype=torch.long, device=device)
    losses = []
    for step in range(config.steps):
        if order.shape[1] < batch_size:  # a new epoch: each model reshuffles from its stream
            order = torch.stack([torch.randperm(len(inputs), generator=g) for g in generators])
            order = order.to(device)
        batch, order = order[:, :batch_size], order[:, batch_size:]
        loss = per_model_loss(forward(params, buffers, inputs[batch]), targets[batch])  # (U,)
        loss.sum().backward()  # each term reaches only its own model's slice
        optimizer.step(config.lr_at(step))  # every model, every step
        losses.append(loss.detach())
    with torch.no_grad():
        for u, model in enumerate(models):
            for name, stacked in params.items():
                model.get_parameter(name).copy_(stacked[u])
            model.eval()
    return torch.stack(losses).T.tolist() if losses else [[] for _ in models]


def _check_stack(
    models: Sequence[nn.Module], inputs: Tensor, targets: Tensor, configs: Sequence[TrainConfig]
) -> None:
    """One architecture, one config but for the seed, no dropout, data as `train` takes it."""
    if len(inputs) != len(targets) or len(inputs) == 0:
        raise InputError(
            f"inputs and targets must hold the same non-zero number of sequences, got "
            f"{len(inputs)} and {len(targets)}."
        )
    shapes = {
        tuple((name, tuple(p.shape)) for name, p in model.named_parameters()) for model in models
    }
    settings = {c.model_copy(update={"seed": 0}).model_dump_json() for c in configs}
    dropout = [type(m).__name__ for model in models for m in model.modules() if _drops(m)]
    if not models or len(models) != len(configs) or len(shapes) > 1 or len(settings) > 1:
        raise ConfigError(
            f"train_stacked takes one TrainConfig per model ({len(configs)} for "
            f"{len(models)} models), equal but for the seed ({len(settings)} distinct), and "
            f"models of one architecture ({len(shapes)} distinct parameter sets); group them "
            "by architecture and settings."
        )
    if dropout:
        raise ConfigError(
            f"train_stacked cannot reproduce a model's own dropout draws ({dropout[0]} with "
            "p > 0); build the models without dropout or train them one by one with train()."
        )


DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)


def _drops(module: nn.Module) -> bool:
    return isinstance(module, DROPOUTS) and module.p > 0
