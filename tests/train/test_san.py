import pytest
import torch
from torch.nn.functional import layer_norm

from rankcollapse.errors import ConfigError
from rankcollapse.paths import FULL, SKIP, sample_paths
from rankcollapse.tasks import convex_hull_data, sorting_data
from rankcollapse.train import (
    SAN,
    CircleNet,
    DirectoryStore,
    MemoryStore,
    SANConfig,
    TrainConfig,
    accuracy,
    train,
    train_model,
)

TINY = {"n_layers": 2, "n_heads": 2, "d_model": 8}


def _sorting_san(seed=0):
    return SANConfig(inputs="tokens", vocab_size=10, n_classes=10, n_positions=8, seed=seed, **TINY)


def test_a_tiny_training_run_lowers_the_loss():
    data = sorting_data(256, seed=0)
    model = SAN(_sorting_san())
    losses = train(model, data.inputs, data.targets, TrainConfig(steps=60, lr=1e-2))
    assert sum(losses[-10:]) / 10 < 0.8 * sum(losses[:10]) / 10


def test_training_is_deterministic_by_seed():
    data = convex_hull_data(64, seed=0)
    config = SANConfig(inputs="points", n_classes=2, **TINY)
    runs = [
        train(SAN(config), data.inputs, data.targets, TrainConfig(steps=5, seed=3))
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


def test_restricted_logits_with_every_layer_whole_equal_the_full_model():
    data = sorting_data(16, seed=1)
    model = SAN(_sorting_san()).eval()
    with torch.no_grad():
        full = model(data.inputs)
        whole = model.restricted_logits(data.inputs, torch.full((1, 1, 2), FULL))[0]
        assert torch.equal(whole, full)
        routes = sample_paths(2, 2, 1, 5, seed=0, n_repeats=3)
        assert model.restricted_logits(data.inputs, routes).shape == (3, 16, 8, 10)


def test_the_empty_path_sees_only_the_embedding():
    data = sorting_data(16, seed=1)
    model = SAN(_sorting_san()).eval()
    with torch.no_grad():
        skip_all = model.restricted_logits(data.inputs, torch.full((1, 1, 2), SKIP))[0]
        x0 = model.embed(data.inputs)  # the one route never goes through a head
        assert torch.allclose(skip_all, model.classify(layer_norm(x0, (8,))), atol=1e-6)


def test_a_checkpoint_is_reused_only_for_the_same_config(tmp_path):
    data = sorting_data(64, seed=0)
    config = _sorting_san()
    short = TrainConfig(steps=3)
    for store in (MemoryStore(), DirectoryStore(tmp_path)):
        first = train_model(
            SAN(config), config.model_dump(), data.inputs, data.targets, short, store=store
        )
        same = train_model(
            SAN(config), config.model_dump(), data.inputs, data.targets, short, store=store
        )
        assert not first.reused and same.reused and same.key == first.key
        for name, value in first.model.state_dict().items():
            assert torch.equal(value, same.model.state_dict()[name])
        other_seed = _sorting_san(seed=1)
        changed = [
            (other_seed, short, data),
            (config, TrainConfig(steps=3, lr=2e-3), data),
            (config, short, sorting_data(64, seed=9)),
        ]
        for san_config, train_config, other_data in changed:
            again = train_model(
                SAN(san_config),
                san_config.model_dump(),
                other_data.inputs,
                other_data.targets,
                train_config,
                store=store,
            )
            assert not again.reused and again.key != first.key


def test_a_store_never_hands_back_a_checkpoint_stored_for_another_config(tmp_path):
    store = DirectoryStore(tmp_path)
    store.save("k", {"lr": 0.1}, {"losses": [1.0]})
    assert store.load("k", {"lr": 0.1}) == {"losses": [1.0]}
    assert store.load("k", {"lr": 0.2}) is None  # same key, other config: a miss
    (tmp_path / "k.pt").write_bytes(b"not a checkpoint")
    assert store.load("k", {"lr": 0.1}) is None


def test_accuracy_counts_matching_tokens_per_group():
    logits = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]], [[[0.0, 1.0], [0.0, 1.0]]]])
    assert accuracy(logits, torch.tensor([[0, 1]])).tolist() == [1.0, 0.5]


def test_circle_net_skip_variant_adds_its_input_to_the_pure_step():
    points = torch.randn(3, 2, 2, generator=torch.Generator().manual_seed(0))
    pure, skip = CircleNet("pure", d_model=8, seed=1), CircleNet("skip", d_model=8, seed=1)
    assert torch.allclose(skip(points), points + pure(points), atol=1e-6)
    assert CircleNet("mlp", d_model=8).forward(points).shape == (3, 2, 2)


def test_bad_san_configs_get_clear_errors():
    with pytest.raises(ConfigError, match="token inputs need vocab_size"):
        SANConfig(inputs="tokens", n_classes=2)
    with pytest.raises(ConfigError, match="d_model=10 is not divisible by n_heads=3"):
        SANConfig(inputs="points", n_classes=2, n_heads=3, d_model=10)
    with pytest.raises(ConfigError, match="store must be a checkpoint store"):
        train_model(
            SAN(_sorting_san()),
            {},
            torch.zeros(2, 8).long(),
            torch.zeros(2, 8).long(),
            TrainConfig(steps=1),
            store="cache/",
        )
