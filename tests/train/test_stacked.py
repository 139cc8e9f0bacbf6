"""Seeds of one module trained as one batched model (`train_stacked`, `train_models`) end where
each ends alone (`train`, `train_model`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rankcollapse.errors import ConfigError
from rankcollapse.nets import CircleNet
from rankcollapse.seeds import stream_seed
from rankcollapse.tasks import circle_data
from rankcollapse.train import MemoryStore, TrainConfig, train, train_model, train_models
from rankcollapse.train import train_stacked

SEEDS = (0, 1)
# b_k adds q_i . b_k to every score of query i: the softmax ignores it, so its gradient is
# float noise that Adam scales to steps of size lr, different in every computation; nothing
# the network computes depends on it
FREE = {"layer.blocks.0.attn.b_k"}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _configs(steps: int = 200) -> list[TrainConfig]:
    """The cpu preset's schedule (warm-up, then cosine) shortened; seed s's own batch order."""
    return [
        TrainConfig(
            steps=steps,
            batch_size=30,
            lr=3e-3,
            schedule="cosine",
            warmup=50,
            loss="mse",
            seed=stream_seed(s, "data"),
        )
        for s in SEEDS
    ]


def _nets(variant: str) -> list[CircleNet]:
    return [CircleNet(variant, seed=stream_seed(s, "weights")) for s in SEEDS]


def test_seeds_trained_together_end_where_each_ends_alone() -> None:
    variant = "san+mlp"  # every parameter of the other variants, and the MLP's
    data = circle_data(200, radius=0.3)  # 99 pairs: an epoch is 3 batches, reshuffled 66 times
    together = _nets(variant)
    losses = train_stacked(together, data.inputs, data.targets, _configs())
    for net, run, config, seed in zip(together, losses, _configs(), SEEDS, strict=True):
        alone = CircleNet(variant, seed=stream_seed(seed, "weights"))
        reference = train(alone, data.inputs, data.targets, config)
        assert len(run) == 200 and not net.training
        assert np.max(np.abs(np.subtract(run, reference))) < 1e-6 * reference[0]
        with torch.no_grad():
            gap = (net(data.inputs) - alone(data.inputs)).abs().max()
        assert gap < 1e-6  # the points are of size 0.3
        mine, theirs = dict(net.named_parameters()), dict(alone.named_parameters())
        for name in set(mine) - FREE:
            assert (mine[name] - theirs[name]).abs().max() < 1e-6, name
        assert reference[-1] < reference[0] / 10  # it trained


def test_train_models_stores_each_run_under_the_key_train_model_gives_it() -> None:
    data = circle_data(40, radius=0.3)
    configs = _configs(steps=20)
    store = MemoryStore()
    described = [{"variant": "san", "seed": stream_seed(s, "weights")} for s in SEEDS]
    first = train_model(
        _nets("san")[0], described[0], data.inputs, data.targets, configs[0], store=store
    )
    trained = train_models(_nets("san"), described, data.inputs, data.targets, configs, store=store)
    assert [t.reused for t in trained] == [True, False]
    assert trained[0].key == first.key and trained[0].losses == first.losses
    again = train_models(_nets("san"), described, data.inputs, data.targets, configs, store=store)
    assert all(t.reused for t in again)
    assert [t.losses for t in again] == [t.losses for t in trained]


def test_models_that_cannot_train_together_are_refused() -> None:
    data = circle_data(40, radius=0.3)
    configs = _configs(steps=2)
    other_lr = [configs[0], configs[1].model_copy(update={"lr": 1e-2})]
    with pytest.raises(ConfigError, match="equal but for the seed"):
        train_stacked(_nets("san")[:2], data.inputs, data.targets, other_lr)
    mixed = [CircleNet("san"), CircleNet("san+mlp")]
    with pytest.raises(ConfigError, match="one architecture"):
        train_stacked(mixed, data.inputs, data.targets, configs[:2])
    dropping = [nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)) for _ in range(2)]
    with pytest.raises(ConfigError, match="dropout"):
        train_stacked(dropping, torch.zeros(4, 2), torch.zeros(4, 2), configs[:2])
