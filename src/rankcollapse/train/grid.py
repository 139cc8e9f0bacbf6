"""Train a whole grid of (d_qk, n_heads, seed) attention layers as one batched model.

Every configuration is a slice of one `StackedRankAttention`: one forward pass, one backward
pass and one optimiser step per training step serve them all. The configurations stay
independent: the summed loss sends each one's gradient only to its own heads, the optimiser
(AdamW without weight decay, written out below) keeps per-head state, and a configuration
whose loss has plateaued is frozen while the others go on. So a configuration trained in a
grid ends where it ends when trained alone with the same seed (up to float rounding), which
`train_one_by_one` (the same loop, one configuration at a time) checks.

Data: fresh samples every step from a seeded stream per seed (`NeighbourTask.stream`);
configurations sharing a seed share their batches. Reported errors are relative MSEs (the
trivial predictor 0 scores 1 on the same samples).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.errors import ConfigError
from rankcollapse.nets.rank_attention import StackedRankAttention, check_rank_heads
from rankcollapse.tasks.neighbours import NeighbourTask, relative_mse
from rankcollapse.train.loop import warmup_cosine

CPU = torch.device("cpu")

if TYPE_CHECKING:  # a grid run without a monitor never imports the real-model code
    from rankcollapse.measure.monitor import Monitor


@dataclass(frozen=True)
class GridPoint:
    """One configuration: query-key rank, number of heads, seed (init and data)."""

    d_qk: int
    n_heads: int
    seed: int


@dataclass(frozen=True)
class TrainSettings:
    """Optimiser, schedule and stopping rule (the paper: AdamW lr 0.01, betas (0.9, 0.95))."""

    steps: int = 3000
    batch_size: int = 256
    lr: float = 0.01
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    warmup: int = 100  # linear warm-up steps, then cosine decay to 0 at `steps`
    log_every: int = 50  # steps averaged into one point of the loss curve
    patience: int = 10  # curve points without a relative improvement of `min_improvement`
    min_improvement: float = 0.01
    eval_samples: int = 4096
    eval_seed: int = 1_000_003  # the held-out samples every configuration is scored on

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "log_every", "patience", "eval_samples"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)}; it must be >= 1.")
        if not self.lr > 0:
            raise ConfigError(f"lr={self.lr}; pass a learning rate > 0.")

    def lr_at(self, step: int) -> float:
        """Linear warm-up over `warmup` steps, then cosine decay to 0 (`warmup_cosine`)."""
        return warmup_cosine(self.lr, step, self.steps, self.warmup)


@dataclass
class GridResult:
    """Loss curves (one row per configuration and curve point) and final scores."""

    curves: pd.DataFrame  # d_qk, n_heads, seed, step, metric, value
    final: pd.DataFrame  # d_qk, n_heads, seed, metric, value
    model: StackedRankAttention | None = None


class StackedAdamW:
    """AdamW (no weight decay) with an on/off switch and a step count per configuration.

    `params` pairs each parameter with the configuration owning each of its rows. With t the
    configuration's own step count and g the gradient, every active row takes

        m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2,
        p <- p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps);

    rows of inactive configurations keep p, m and v. The moments of all parameters of one
    dtype are one flat buffer, so a step is a dozen operations on the concatenated gradients
    however many parameters there are. While every configuration is active (`active` None:
    the trainer knows it on the host), t is one number and the step runs in place, without a
    switch or a count to gather per row.
    """

    def __init__(
        self, params: Sequence[tuple[Tensor, Tensor]], n_configs: int, settings: TrainSettings
    ) -> None:
        self.settings = settings
        where = params[0][0].device  # MPS has no float64; float32 counts steps exactly
        count_dtype = torch.float32 if where.type == "mps" else torch.float64
        self.steps = torch.zeros(n_configs, dtype=count_dtype, device=where)
        self.together = 0  # steps every configuration took (the count while all are active)
        self.groups: list[tuple[list[Tensor], Tensor, Tensor]] = []  # per dtype
        for dtype in dict.fromkeys(p.dtype for p, _ in params):
            members = [(p, owner) for p, owner in params if p.dtype == dtype]
            owner = torch.cat(  # each element's configuration, (N,)
                [o.view(-1, *[1] * (p.dim() - 1)).expand_as(p).flatten() for p, o in members]
            )
            moments = torch.zeros(2, len(owner), dtype=dtype, device=where)  # m, v
            self.groups.append(([p for p, _ in members], owner, moments))

    @torch.no_grad()
    def step(self, lr: float, active: Tensor | None = None) -> None:
        """One update of the configurations where `active` (C,) is True; the others keep all
        state. None: every configuration, each of them active at every step so far."""
        no_grad = [[p.grad is None for p in params] for params, _, _ in self.groups]
        if active is None and not any(any(group) for group in no_grad):
            self._step_all(lr)
            return
        (b1, b2), eps = self.settings.betas, self.settings.eps
        if active is None:  # every one, but a parameter without a gradient: the masked step
            self.together += 1
            active = torch.ones_like(self.steps, dtype=torch.bool)
        self.steps += active
        bias1 = (1 - b1**self.steps).clamp_min(1e-12)
        bias2 = (1 - b2**self.steps).clamp_min(1e-12)
        for (params, owner, (m, v)), missing in zip(self.groups, no_grad, strict=True):
            if all(missing):
                continue
            on = active[owner]
            if any(missing):  # no gradient reached it: left as it is, as torch's optimisers do
                reached = [
                    torch.full((p.numel(),), not gone, device=on.device)
                    for p, gone in zip(params, missing, strict=True)
                ]
                on &= torch.cat(reached)
            grad = torch.cat(
                [(torch.zeros_like(p) if p.grad is None else p.grad).flatten() for p in params]
            )
            m.copy_(torch.where(on, b1 * m + (1 - b1) * grad, m))
            v.copy_(torch.where(on, b2 * v + (1 - b2) * grad.square(), v))
            c1, c2 = bias1.to(m.dtype)[owner], bias2.to(m.dtype)[owner]
            _apply(params, torch.where(on, lr * (m / c1) / ((v / c2).sqrt() + eps), 0.0))

    def _step_all(self, lr: float) -> None:
        """`step` of every configuration, all at the same count t: in place, t one number."""
        (b1, b2), eps = self.settings.betas, self.settings.eps
        self.steps += 1
        self.together += 1
        c1, c2 = 1 - b1**self.together, 1 - b2**self.together
        for params, _, (m, v) in self.groups:
            grad = torch.cat([g.flatten() for p in params if (g := p.grad) is not None])
            m.mul_(b1).add_(grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            _apply(params, (m / c1).mul_(lr).div_((v / c2).sqrt_().add_(eps)))


def _apply(params: list[Tensor], update: Tensor) -> None:
    """Subtract the flat `update` from `params`, in their order, and clear their gradients."""
    for p, u in zip(params, update.split([p.numel() for p in params]), strict=True):
        p.sub_(u.view_as(p))
        p.grad = None


def _check_grid(task: NeighbourTask, points: Sequence[GridPoint]) -> None:
    if not points:
        raise ConfigError("the grid is empty; pass at least one GridPoint.")
    for p in points:
        check_rank_heads(task.d_model, p.d_qk, p.n_heads)


def _batch(streams) -> tuple[Tensor, Tensor, Tensor]:
    """One fresh batch per data stream (seed): queries, x, target of shape (S, b, ., d)."""
    batches = [next(s) for s in streams]
    stack = lambda name: torch.stack([getattr(b, name) for b in batches])
    return stack("queries"), stack("x"), stack("target")


def _qk_alignment(model: StackedRankAttention, c: int, sign: float) -> float:
    """Cosine between sum_h W_Q,h^T W_K,h and sign * I (the full-rank solution's direction)."""
    w_q, w_k, _ = model.config_weights(c)
    product = (w_q.transpose(-1, -2) @ w_k).sum(0).cpu().double()
    eye = torch.eye(product.shape[0], dtype=torch.float64)
    return float(sign * (product * eye).sum() / (product.norm() * eye.norm()).clamp_min(1e-300))


def train_grid(
    task: NeighbourTask,
    points: Sequence[GridPoint],
    settings: TrainSettings = TrainSettings(),
    *,
    hard: bool = False,
    keep_model: bool = False,
    device: torch.device = CPU,
    monitor: Callable[[StackedRankAttention], Monitor] | None = None,
) -> GridResult:
    """Train every configuration of `points` on `task` at once (float32), one optimiser step each.

    `monitor` is called with the grid's model once it is built and returns a
    `rankcollapse.measure.monitor.Monitor` (e.g. one whose measure function measures every
    configuration's output on held-out sets); it measures before the first step and after each
    step its interval divides (steps count from 1), and is closed at the end.

    The model trains on `device` (a `torch.device` its caller resolved, e.g. an experiment
    config's `Device` field, checked visible at `make_config`), where its data are drawn too (no host
    work per step; an accelerator draws other batches than the CPU from the same seeds), and
    the host reads the losses once per `log_every` steps.

    Returns the loss curves (`train_rel_mse`, the mean over `log_every` steps) and, per
    configuration, `eval_rel_mse` (held-out samples), `best_train_rel_mse` (the minimum of the
    curve, the paper's convention), `steps_run` and `qk_alignment` (cosine of the summed
    W_Q^T W_K with +I for "nearest", -I for "farthest").
    """
    _check_grid(task, points)
    model = StackedRankAttention(
        task.d_model,
        d_qk=[p.d_qk for p in points],
        n_heads=[p.n_heads for p in points],
        seeds=[p.seed for p in points],
        hard=hard,
    ).to(device)
    where = model.w_q.device
    streams = [task.stream(settings.batch_size, seed=s, device=where) for s in model.streams]
    owners = [
        (model.w_q, model.row_config),
        (model.w_k, model.row_config),
        (model.w_o, model.head_config),
    ]
    optimiser = StackedAdamW(owners, len(points), settings)
    plateaus = _Plateaus.start(len(points), where)
    steps_run = torch.zeros(len(points), dtype=torch.long, device=where)
    window, curve_rows = [], []
    watching = monitor(model) if monitor is not None else None
    if watching is not None:
        watching.step(0)
    every = True  # every configuration still trains (known on the host at each curve point)
    for step in range(settings.steps):
        active = None if every else plateaus.active
        window.append(_train_step(model, streams, optimiser, settings.lr_at(step), active))
        steps_run += plateaus.active
        if watching is not None:
            watching.step(step + 1)
        if (step + 1) % settings.log_every == 0:
            mean = torch.stack(window).cpu().double().mean(0)  # the host reads once per log
            window = []
            curve_rows += [
                (p.d_qk, p.n_heads, p.seed, step + 1, float(mean[c]))
                for c, p in enumerate(points)
                if plateaus.active[c]
            ]
            if not plateaus.update(mean, settings):
                break
            every = every and bool(plateaus.active.all())
    if watching is not None:
        watching.close()
    curves = _curves_frame(curve_rows)
    final = _final_scores(task, points, settings, model, curves, steps_run.cpu())
    return GridResult(curves, final, model if keep_model else None)


def mean_squared_errors(prediction: Tensor, target: Tensor) -> Tensor:
    """Per model u, the mean over its samples of ||f_u - f*_u||^2: (U, ..., d) -> (U,).

    Formula: (1 / m) sum_i ||f_ui - f*_ui||^2 over the m rows i of model u (the loss of
    Amsel, Yehudai, Bruna 2024, Sec. 3). Its backward, 2 (f_u - f*_u) / m per model, is
    written out: autograd's five element-wise passes took 297 us against 111 here for 16
    models of 512 rows (one thread, 2026-11-30).

    Example:
        >>> mean_squared_errors(torch.ones(2, 3, 4), torch.zeros(2, 3, 4))
        tensor([4., 4.])
    """
    return _MeanSquaredErrors.apply(prediction, target)


class _MeanSquaredErrors(torch.autograd.Function):
    """`mean_squared_errors`: one product per model forward, one product backward."""

    @staticmethod
    def forward(ctx, prediction, target):
        difference = prediction - target
        ctx.rows = difference[0].numel() // difference.shape[-1]  # m
        ctx.target_shape = target.shape  # a broadcast target's gradient is summed back to it
        flat = difference.reshape(len(difference), 1, -1)  # (U, 1, m d); inputs of any layout
        ctx.save_for_backward(difference)
        return (flat @ flat.mT).view(-1) / ctx.rows

    @staticmethod
    def backward(ctx, grad):
        (difference,) = ctx.saved_tensors
        scale = grad * (2 / ctx.rows)  # (U,)
        grad_prediction = difference * scale.view(-1, *[1] * (difference.dim() - 1))
        if not ctx.needs_input_grad[1]:
            return grad_prediction, None
        return grad_prediction, (-grad_prediction).sum_to_size(ctx.target_shape)


def _train_step(
    model: StackedRankAttention,
    streams: list,
    optimiser: StackedAdamW,
    lr: float,
    active: Tensor | None,
) -> Tensor:
    """One step of every active configuration (None: all) on a fresh batch; returns each one's
    relative MSE on it (C,), its squared error over the zero predictor's on the same samples."""
    queries, x, target = _batch(streams)
    trivial = mean_squared_errors(target, target.new_zeros(()))  # (S,): predicting 0
    # (C,), each configuration against its stream's targets
    per_config = mean_squared_errors(model(queries, x), model.per_config(target))
    per_config.sum().backward()  # each term reaches only its own configuration's heads
    optimiser.step(lr, active)
    return per_config.detach() / model.per_config(trivial)


@dataclass
class _Plateaus:
    """The stopping rule: per configuration the best curve point so far, the points since
    it improved by `min_improvement`, and whether it still trains (on the model's device)."""

    active: Tensor  # (C,) bool
    best: Tensor  # (C,) float64, on the host
    since_best: Tensor  # (C,) long, on the host

    @classmethod
    def start(cls, n_configs: int, where: torch.device) -> _Plateaus:
        return cls(
            torch.ones(n_configs, dtype=torch.bool, device=where),
            torch.full((n_configs,), math.inf, dtype=torch.float64),
            torch.zeros(n_configs, dtype=torch.long),
        )

    def update(self, mean: Tensor, settings: TrainSettings) -> bool:
        """Take one curve point (C,); stop the configurations that have plateaued (`patience`
        points without improvement). Returns whether any still trains."""
        improved = mean < self.best * (1 - settings.min_improvement)
        self.best = torch.where(self.active.cpu() & (mean < self.best), mean, self.best)
        self.since_best = torch.where(improved, 0, self.since_best + 1)
        self.active &= (self.since_best < settings.patience).to(self.active.device)
        return bool(self.active.any())


def _curves_frame(rows: list[tuple]) -> pd.DataFrame:
    """The loss curves' rows as a tidy frame: d_qk, n_heads, seed, step, metric, value."""
    curves = pd.DataFrame(rows, columns=["d_qk", "n_heads", "seed", "step", "value"])
    curves = curves.astype({"d_qk": int, "n_heads": int, "seed": int, "step": int, "value": float})
    curves.insert(4, "metric", "train_rel_mse")
    return curves


@torch.no_grad()
def _final_scores(task, points, settings, model, curves, steps_run) -> pd.DataFrame:
    held_out = task.sample(
        settings.eval_samples, torch.Generator().manual_seed(settings.eval_seed), torch.float32
    )
    where = model.w_q.device
    chunk = 512
    predictions = []
    n_streams = len(model.streams)  # every stream is scored on the same held-out samples
    for start in range(0, settings.eval_samples, chunk):
        queries = held_out.queries[start : start + chunk].to(where)
        x = held_out.x[start : start + chunk].to(where)
        shape = (n_streams, *x.shape[:-2])
        predictions.append(
            model(queries.expand(*shape, *queries.shape[-2:]), x.expand(*shape, *x.shape[-2:]))
        )
    prediction = torch.cat(predictions, dim=1).cpu()  # (C, samples, q, d)
    sign = -1.0 if task.target == "farthest" else 1.0
    best = curves.groupby(["d_qk", "n_heads", "seed"]).value.min().to_dict()  # the curves' minima
    rows = []
    for c, p in enumerate(points):
        ids = (p.d_qk, p.n_heads, p.seed)
        rows += [
            (*ids, "eval_rel_mse", float(relative_mse(prediction[c], held_out.target))),
            (*ids, "best_train_rel_mse", best.get(ids, math.nan)),
            (*ids, "steps_run", float(steps_run[c])),
            (*ids, "qk_alignment", _qk_alignment(model, c, sign)),
        ]
    return pd.DataFrame(rows, columns=["d_qk", "n_heads", "seed", "metric", "value"])


def train_one_by_one(
    task: NeighbourTask,
    points: Sequence[GridPoint],
    settings: TrainSettings = TrainSettings(),
    *,
    hard: bool = False,
    device: torch.device = CPU,
) -> GridResult:
    """The same loop, one configuration after another (the reference for `train_grid`)."""
    _check_grid(task, points)
    results = [train_grid(task, [p], settings, hard=hard, device=device) for p in points]
    return GridResult(
        pd.concat([r.curves for r in results], ignore_index=True),
        pd.concat([r.final for r in results], ignore_index=True),
    )
