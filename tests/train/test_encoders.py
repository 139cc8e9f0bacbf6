"""Encoders of one shape trained side by side (`train_encoders`) end where each ends alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.nets import RankEncoder, StackedRankEncoder
from rankcollapse.tasks import NeighbourTask
from rankcollapse.train import TrainSettings, train_encoder, train_encoders

SEEDS = (0, 1, 2)


def _encoders(n_layers: int = 2) -> list[RankEncoder]:
    return [
        RankEncoder(4, n_heads=8, n_layers=n_layers, d_ff=16, positions=4, seed=s) for s in SEEDS
    ]


def _gap(a: pd.DataFrame, b: pd.DataFrame) -> float:
    keys = [c for c in ("step", "metric") if c in b.columns]
    assert a[keys].equals(b[keys])
    return float(np.max(np.abs(a.value.to_numpy() - b.value.to_numpy()) / b.value.abs().to_numpy()))


@pytest.mark.parametrize("patience", [100, 2])
def test_encoders_trained_together_end_where_each_ends_alone(patience: int) -> None:
    task = NeighbourTask(4, 4, target="farthest")
    settings = TrainSettings(
        steps=60, batch_size=16, log_every=5, warmup=5, patience=patience, eval_samples=128
    )
    together = train_encoders(_encoders(), task, settings, seeds=SEEDS)
    alone = [
        train_encoder(e, task, settings, seed=s) for e, s in zip(_encoders(), SEEDS, strict=True)
    ]
    for mine, reference in zip(together, alone, strict=True):
        assert len(mine.curves) >= 2  # patience 2 stops some early: then at the same step
        assert _gap(mine.curves, reference.curves) < 1e-6
        assert _gap(mine.final, reference.final) < 1e-6
    steps = [float(r.final.set_index("metric").value["steps_run"]) for r in alone]
    assert patience > 10 or min(steps) < settings.steps  # the early stop is exercised


def test_stacked_encoder_computes_each_encoder_and_copies_weights_back() -> None:
    encoders = _encoders(n_layers=3)
    stack = StackedRankEncoder(encoders)
    x = torch.randn(3, 5, 4, 4, generator=torch.Generator().manual_seed(0))
    out = stack(x)
    for u, encoder in enumerate(encoders):
        assert torch.allclose(out[u], encoder(x[u]), atol=1e-6)
    with torch.no_grad():
        stack.layers[0]["gain1"].mul_(2.0)
    stack.unstack_into(encoders)
    assert float(encoders[1].layers[0].norm1.gain.detach()) == pytest.approx(2.0)


def test_stacked_encoder_refuses_encoders_of_other_shapes() -> None:
    mixed = [
        RankEncoder(4, n_heads=2, n_layers=1, d_ff=8),
        RankEncoder(4, n_heads=4, n_layers=1, d_ff=8),
    ]
    with pytest.raises(ConfigError, match="one shape.*group them by shape"):
        StackedRankEncoder(mixed)
    with pytest.raises(ConfigError, match="one seed per encoder"):
        train_encoders(
            _encoders(), NeighbourTask(4, 4, target="farthest"), TrainSettings(), seeds=[0]
        )


def test_encoders_read_the_host_once_per_log_not_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []
    for name in ("cpu", "item", "tolist", "__bool__", "__float__", "__int__"):
        method = getattr(torch.Tensor, name)

        def counted(tensor, *args, _method=method, _name=name, **kwargs):
            reads.append(_name)
            return _method(tensor, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    task = NeighbourTask(4, 4, target="farthest")
    counts = []
    for steps in (10, 40):
        settings = TrainSettings(steps=steps, batch_size=8, log_every=10, eval_samples=64)
        reads.clear()
        train_encoders(_encoders(n_layers=1), task, settings, seeds=SEEDS)
        counts.append(len(reads))
    assert counts[1] - counts[0] == 3  # 30 more steps: three more logs, one read each
