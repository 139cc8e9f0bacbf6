import json

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.nets import SAN, SANConfig
from rankcollapse.tasks import convex_hull_data, sorting_data
from rankcollapse.train import DirectoryStore, MemoryStore, TrainConfig, train, train_model

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
    config = SANConfig(inputs="points", n_classes=2, **TINY)  # with the authors' dropout 0.1
    models = [SAN(config), SAN(config)]
    torch.manual_seed(123)
    before = torch.get_rng_state()
    runs = [train(m, data.inputs, data.targets, TrainConfig(steps=5, seed=3)) for m in models]
    assert runs[0] == runs[1]
    assert torch.equal(torch.get_rng_state(), before)  # the caller's generator is left alone
    other = train(SAN(config), data.inputs, data.targets, TrainConfig(steps=5, seed=4))
    assert other != runs[0]


def test_training_runs_with_dropout_and_ends_in_eval_mode():
    data = convex_hull_data(64, seed=0)
    model = SAN(SANConfig(inputs="points", n_classes=2, dropout=0.5, **TINY))
    seen = []
    model.dropout.register_forward_hook(lambda m, i, o: seen.append(m.training))
    train(model, data.inputs, data.targets, TrainConfig(steps=2))
    assert seen == [True] * 4  # embedding and classifier input, 2 steps: dropout active
    assert not model.training and not any(m.training for m in model.modules())


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


def test_a_bad_store_gets_a_clear_error():
    with pytest.raises(ConfigError, match="store must be a checkpoint store"):
        train_model(
            SAN(_sorting_san()),
            {},
            torch.zeros(2, 8).long(),
            torch.zeros(2, 8).long(),
            TrainConfig(steps=1),
            store="cache/",
        )


def test_the_checkpoint_key_names_the_device_and_the_model_comes_back_on_it():
    data = sorting_data(16, seed=0)
    config = _sorting_san()
    store = MemoryStore()
    cpu = train_model(
        SAN(config), config.model_dump(), data.inputs, data.targets, TrainConfig(steps=1),
        store=store, device="cpu",
    )  # fmt: skip
    assert next(cpu.model.parameters()).device.type == "cpu"
    ((_, (stored_config, _)),) = store.entries.items()
    assert json.loads(stored_config)["device"] == "cpu"


def test_the_cosine_schedule_warms_up_then_decays_and_a_constant_rate_keeps_its_old_key():
    cosine = TrainConfig(steps=10, lr=1.0, schedule="cosine", warmup=2)
    rates = [cosine.lr_at(step) for step in range(10)]
    assert rates[:3] == [0.5, 1.0, 1.0] and rates[2:] == sorted(rates[2:], reverse=True)
    assert rates[-1] < 0.05
    assert TrainConfig(steps=10, lr=0.1).lr_at(7) == 0.1
    assert "schedule" not in TrainConfig().key_fields()  # checkpoints stored before it match
    assert cosine.key_fields()["schedule"] == "cosine"


def test_training_follows_the_schedule(monkeypatch):
    seen = []

    class Spy(torch.optim.Adam):
        def step(self, closure=None):
            seen.append(self.param_groups[0]["lr"])
            return super().step(closure)

    data = convex_hull_data(16, seed=0)
    config = TrainConfig(steps=4, lr=1.0, schedule="cosine", warmup=2, batch_size=4)
    monkeypatch.setattr(torch.optim, "Adam", Spy)
    train(SAN(SANConfig(inputs="points", n_classes=2, **TINY)), data.inputs, data.targets, config)
    assert seen == [config.lr_at(step) for step in range(4)]


def test_the_path_effectiveness_training_takes_a_monitor_of_its_san():
    from rankcollapse.measure.monitor import MemoryLog, watch
    from rankcollapse.train import TaskSetup, train_on_task

    setup = TaskSetup(n_train=8, n_eval=4, n_tokens=5, n_layers=2, d_model=4, steps=4,
                      batch_size=4)  # fmt: skip
    log = MemoryLog()
    ids = torch.randint(5, (2, 5), generator=torch.Generator().manual_seed(0))

    def monitor(san):
        return watch(san, blocks="body.blocks", inputs=ids, every=2, metrics=["mu_rel"],
                     logs=[log])  # fmt: skip

    watched, _ = train_on_task("sorting", setup, seed=0, monitor=monitor)
    plain, _ = train_on_task("sorting", setup, seed=0)
    assert watched.losses == plain.losses
    assert log.frame.groupby("step").size().to_dict() == {0: 3 * 2, 2: 3 * 2, 4: 3 * 2}
