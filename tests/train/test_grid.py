"""Batched grid training: each configuration ends where it ends alone (same seed), frozen
configurations keep their parameters, the schedule, and bad input."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.nets import RankEncoder
from rankcollapse.tasks import NeighbourTask
from rankcollapse.train.grid import StackedAdamW, mean_squared_errors
from rankcollapse.train import (
    GridPoint,
    TrainSettings,
    tail_change,
    train_encoder,
    train_grid,
    train_one_by_one,
)

TASK = NeighbourTask(6, 4, target="farthest")
SETTINGS = TrainSettings(steps=40, batch_size=16, warmup=5, log_every=10, eval_samples=128)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_batched_grid_gives_each_configuration_its_own_result():
    points = [GridPoint(1, 3, 0), GridPoint(6, 1, 0), GridPoint(2, 2, 1), GridPoint(3, 1, 1)]
    grid, alone = train_grid(TASK, points, SETTINGS), train_one_by_one(TASK, points, SETTINGS)
    keys = ["d_qk", "n_heads", "seed", "metric"]
    final = grid.final.merge(alone.final, on=keys, suffixes=("_grid", "_alone"))
    curves = grid.curves.merge(alone.curves, on=[*keys, "step"], suffixes=("_grid", "_alone"))
    assert len(final) == len(grid.final) == 4 * 4 and len(curves) == 4 * 4
    pd.testing.assert_series_equal(
        final.value_grid, final.value_alone, check_names=False, rtol=1e-4
    )
    pd.testing.assert_series_equal(
        curves.value_grid, curves.value_alone, check_names=False, rtol=1e-4
    )
    best = grid.final[grid.final.metric == "best_train_rel_mse"]
    assert len(set(best.value)) == 4
    for point, value in zip(points, best.value, strict=True):  # each its own curve's minimum
        own = grid.curves[(grid.curves.d_qk == point.d_qk) & (grid.curves.seed == point.seed)]
        assert value == own.value.min()


def test_a_plateaued_configuration_is_frozen_while_the_others_go_on():
    settings = TrainSettings(
        steps=40,
        batch_size=8,
        warmup=0,
        log_every=10,
        patience=1,
        min_improvement=0.99,
        eval_samples=64,
    )
    result = train_grid(TASK, [GridPoint(1, 1, 0), GridPoint(6, 1, 0)], settings, keep_model=True)
    steps = result.final[result.final.metric == "steps_run"].value.tolist()
    assert steps == [20.0, 20.0]  # no 99% improvement: both stop after their second window
    assert result.curves.step.max() == 20


def test_the_optimiser_updates_only_active_configurations_and_parameters_with_a_gradient():
    w, b = torch.ones(3, 2, requires_grad=True), torch.ones(3, requires_grad=True)
    owner = torch.tensor([0, 1, 1])
    optimiser = StackedAdamW([(w, owner), (b, owner)], 2, TrainSettings(betas=(0.9, 0.95)))
    w.grad = torch.full((3, 2), 2.0)  # b gets none
    optimiser.step(0.1, torch.tensor([True, False]))
    # the first step moves by lr sign(g) (bias-corrected moments): row 0 only
    assert w.flatten().tolist() == pytest.approx([0.9, 0.9, 1.0, 1.0, 1.0, 1.0])
    assert b.tolist() == [1.0, 1.0, 1.0] and w.grad is None
    w.grad = torch.full((3, 2), 2.0)
    optimiser.step(0.1, torch.tensor([False, True]))
    assert w.flatten().tolist() == pytest.approx([0.9] * 6)  # config 1's own first step


def test_the_step_of_every_configuration_equals_the_masked_step_with_all_active():
    """`step(lr)` (every configuration, in place) against `step(lr, all True)` over 5 steps
    of random gradients, then one configuration switched off in both: float32 rounding."""
    torch.manual_seed(0)
    grads = torch.randn(6, 4, 3)
    owner = torch.tensor([0, 0, 1, 1])
    weights = [torch.ones(4, 3, requires_grad=True) for _ in range(2)]
    optimisers = [StackedAdamW([(w, owner)], 2, TrainSettings()) for w in weights]
    for k, g in enumerate(grads):
        for w, optimiser, together in zip(weights, optimisers, (True, False), strict=True):
            w.grad = g.clone()
            active = torch.tensor([True, k < 5])
            optimiser.step(0.01, None if together and k < 5 else active)
    assert torch.allclose(weights[0], weights[1], rtol=1e-6, atol=1e-7)
    assert (weights[0] != 1).all() and optimisers[0].steps.tolist() == [6.0, 5.0]


def test_the_mean_squared_errors_and_their_gradient_equal_autograds_per_model():
    generator = torch.Generator().manual_seed(0)
    prediction = torch.randn(3, 5, 2, 4, generator=generator, dtype=torch.float64)
    target = torch.randn(3, 5, 2, 4, generator=generator, dtype=torch.float64)
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)  # a different pull per model
    expected = (prediction - target).square().sum(-1).flatten(1).mean(1)
    fused = prediction.clone().requires_grad_()
    plain = prediction.clone().requires_grad_()
    (mean_squared_errors(fused, target) * weights).sum().backward()
    ((plain - target).square().sum(-1).flatten(1).mean(1) * weights).sum().backward()
    assert torch.allclose(mean_squared_errors(prediction, target), expected, rtol=1e-14)
    assert torch.allclose(fused.grad, plain.grad, rtol=1e-14, atol=0)
    assert torch.autograd.gradcheck(mean_squared_errors, (plain.detach().requires_grad_(), target))
    both = (plain.detach().requires_grad_(), target[:1].clone().requires_grad_())
    assert torch.autograd.gradcheck(mean_squared_errors, both)  # a broadcast target's too
    # one stream's targets as a view for every model, a prediction in another layout: the same
    shared = target[:1].expand_as(target)
    swapped = prediction.transpose(1, 2).contiguous().transpose(1, 2)
    expected = (prediction - shared).square().sum(-1).flatten(1).mean(1)
    assert torch.allclose(mean_squared_errors(swapped, shared), expected, rtol=1e-14)


def test_learning_rate_warms_up_linearly_then_decays_to_zero():
    s = TrainSettings(steps=110, lr=0.1, warmup=10)
    assert s.lr_at(0) == pytest.approx(0.01) and s.lr_at(9) == pytest.approx(0.1)
    assert s.lr_at(10) == pytest.approx(0.1) and s.lr_at(110) == pytest.approx(0.0)


def test_bad_grid_gets_a_clear_error():
    with pytest.raises(ConfigError, match="grid is empty"):
        train_grid(TASK, [])
    with pytest.raises(ConfigError, match="d_qk=7 .* d_model=6"):
        train_grid(TASK, [GridPoint(7, 1, 0)])
    with pytest.raises(ConfigError, match="steps=0"):
        TrainSettings(steps=0)


def test_encoder_training_records_a_curve_and_needs_self_attention():
    model = RankEncoder(6, n_heads=2, n_layers=1, d_ff=8, seed=0)
    result = train_encoder(model, TASK, SETTINGS, seed=0)
    assert list(result.curves.step) == [10, 20, 30, 40]
    assert set(result.final.metric) == {
        "eval_rel_mse",
        "best_train_rel_mse",
        "steps_run",
        "zero_rel_mse",
        "linear_rel_mse",
    }
    with pytest.raises(ConfigError, match="farthest-point target; got target='nearest'"):
        train_encoder(model, NeighbourTask(6, 4), SETTINGS)
    assert torch.isfinite(torch.tensor(result.final.value.tolist())).all()


def test_tail_change_is_zero_on_a_plateau_and_the_relative_fall_otherwise():
    assert tail_change([2.0, 1.0, 0.5, 0.5, 0.5, 0.5]) == 0.0
    assert tail_change([1.0, 0.8, 0.6, 0.4]) == pytest.approx((0.9 - 0.5) / 0.9)
    assert tail_change([0.5, 0.5, 0.6, 0.6]) == pytest.approx(-0.2)  # rising: negative
    assert math.isnan(tail_change([1.0, 0.5, 0.2]))  # too short to judge


def test_a_grid_takes_a_monitor_of_its_model_and_trains_the_same():
    from rankcollapse.measure.monitor import MemoryLog, Monitor
    from rankcollapse.metrics import measure_states, metrics_frame

    points = [GridPoint(1, 2, 0), GridPoint(4, 1, 0)]
    held_out = TASK.sample(3, torch.Generator().manual_seed(5))
    log, built = MemoryLog(), []

    def monitor(model):  # each configuration's output on 3 held-out sets, as "layer 1"
        built.append(model)

        def measure(step):
            with torch.no_grad():
                out = model(held_out.queries[None], held_out.x[None])  # (C, 3, q, d)
            values = measure_states(out.double(), metrics=["mu_rel"])
            return metrics_frame(values, step=step, layer=1, variant="transformer")

        return Monitor(measure, every=20, logs=[log])

    watched = train_grid(TASK, points, SETTINGS, monitor=monitor)
    plain = train_grid(TASK, points, SETTINGS)
    pd.testing.assert_frame_equal(watched.final, plain.final)
    assert len(built) == 1
    assert log.frame.groupby("step").size().to_dict() == {0: 2 * 3, 20: 2 * 3, 40: 2 * 3}
