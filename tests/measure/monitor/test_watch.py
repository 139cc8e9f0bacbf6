"""The monitor measures what the probe measures, leaves the model as it was, and checks its
options before any work."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from rankcollapse.errors import ConfigError, InputError, UnknownNameError
from rankcollapse.measure import probe
from rankcollapse.measure.monitor import COLUMNS, MemoryLog, watch
from rankcollapse.metrics import measure_layers
from rankcollapse.nets import NetConfig, ToyNet, random_tokens

KEY = ["variant", "layer", "sample", "metric"]


def tiny_gpt2(seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=64, n_positions=32,
                        bos_token_id=1, eos_token_id=2)  # fmt: skip
    return GPT2LMHeadModel(config)


def test_monitor_numbers_at_a_step_equal_probe_on_the_same_weights_and_batch():
    model = tiny_gpt2()
    model.train()  # mid-training: dropout on, as the trainer leaves it
    options = {"random_tokens": True, "n_samples": 3, "n_tokens": 12, "seed": 4}
    monitor = watch(model, variants=["transformer", "san"], every=5, **options)
    rows = monitor.step(10)
    assert list(rows.columns) == list(COLUMNS) and set(rows["step"]) == {10}
    expected = probe(model, variants=["transformer", "san"], metrics=list(rows.metric.unique()),
                     **options)  # fmt: skip
    got = rows.set_index(KEY).sort_index()
    want = expected.set_index(KEY).sort_index()
    assert len(got) == len(want) == 2 * 3 * 3 * 3  # variants x layers x samples x metrics
    assert got.index.equals(want.index)
    assert (got["value"] == want["value"]).all()  # the same code path: equal, not close
    assert (got["at_floor"] == want["at_floor"]).all()


def test_monitor_of_a_module_with_declared_blocks_equals_its_own_trace():
    net = ToyNet(NetConfig(n_layers=3, d_model=8, n_heads=2, skip="on", norm="pre"))
    x = random_tokens(4, 6, 8, seed=1)
    rows = watch(net, blocks="blocks", inputs=x, metrics=["mu_rel", "cos_mean"]).step(0)
    expected = measure_layers(net(x).states, metrics=["mu_rel", "cos_mean"])
    got = rows.set_index(["layer", "sample", "metric"]).sort_index()["value"]
    want = expected.set_index(["layer", "sample", "metric"]).sort_index()["value"]
    assert got.index.equals(want.index) and (got == want).all()


def test_a_measurement_restores_modes_hooks_and_gradients_and_skips_other_steps():
    model = tiny_gpt2()
    model.train()
    model.transformer.h[0].eval()  # a mixed state is put back as it was
    modes = {name: m.training for name, m in model.named_modules()}
    log = MemoryLog()
    monitor = watch(model, random_tokens=True, n_samples=2, n_tokens=8, every=3, logs=[log])
    for step in range(7):
        monitor.step(step)
    assert sorted(log.frame["step"].unique()) == [0, 3, 6]
    assert {name: m.training for name, m in model.named_modules()} == modes
    hooks = [m for m in model.modules() if m._forward_hooks or m._forward_pre_hooks]
    assert hooks == [] and all(p.grad is None for p in model.parameters())


def test_held_out_batch_is_chosen_once_and_seeded():
    model = tiny_gpt2()
    first = watch(model, random_tokens=True, n_samples=2, n_tokens=8, seed=3)
    second = watch(model, random_tokens=True, n_samples=2, n_tokens=8, seed=3)
    other = watch(model, random_tokens=True, n_samples=2, n_tokens=8, seed=4)
    a, b, c = first.measure(0), second.measure(0), other.measure(0)
    assert a["value"].equals(b["value"]) and not a["value"].equals(c["value"])
    with torch.no_grad():
        model.transformer.h[1].attn.c_attn.weight.mul_(3.0)  # "a training step"
    assert not first.measure(1)["value"].equals(a["value"])


def test_user_tensors_with_padding_never_enter_a_statistic():
    model = tiny_gpt2()
    ids = torch.randint(3, 64, (2, 10), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, 7:] = False
    padded = ids.clone()
    padded[1, 7:] = 0
    rows = watch(model, inputs=padded, token_mask=mask, metrics=["mu_rel"]).measure(0)
    alone = watch(model, inputs=ids[1:, :7], metrics=["mu_rel"]).measure(0)
    got = rows[rows["sample"] == 1]["value"].to_numpy()
    assert got == pytest.approx(alone["value"].to_numpy(), rel=1e-5)


def test_bad_options_fail_before_any_work_with_a_clear_message():
    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    x = random_tokens(2, 4, 8, seed=0)
    with pytest.raises(ConfigError, match="declare its blocks"):
        watch(net, inputs=x)
    with pytest.raises(ConfigError, match="no module list at 'layerz'"):
        watch(net, blocks="layerz", inputs=x)
    with pytest.raises(ConfigError, match="needs its held-out batch"):
        watch(net, blocks="blocks")
    with pytest.raises(ConfigError, match="Hugging Face models only"):
        watch(net, blocks="blocks", inputs=x, variants=["san"])
    with pytest.raises(ConfigError, match="attention metric"):
        watch(net, blocks="blocks", inputs=x, metrics=["attn_entropy"])
    with pytest.raises(UnknownNameError, match="Did you mean 'mu_rel'"):
        watch(net, blocks="blocks", inputs=x, metrics=["mu_rell"])
    with pytest.raises(ConfigError, match="every must be an int >= 1"):
        watch(net, blocks="blocks", inputs=x, every=0)
    with pytest.raises(InputError, match=r"pass a boolean mask of shape \(1, 4\)"):
        watch(tiny_gpt2(), inputs=torch.ones(1, 4, dtype=torch.long), token_mask=torch.ones(1, 5))
    with pytest.raises(InputError, match=r"\(32 positions\); pass n_tokens=32 or fewer"):
        watch(tiny_gpt2(), random_tokens=True, n_tokens=64)
    with pytest.raises(InputError, match="steps done"):
        watch(net, blocks="blocks", inputs=x).step(-1)


def test_memory_log_keeps_one_run_from_its_start():
    log = MemoryLog(resume=True)
    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    x = random_tokens(2, 4, 8, seed=0)
    for start in (0, 4):  # a second run resumes at step 4
        monitor = watch(net, blocks="blocks", inputs=x, every=2, metrics=["mu_rel"], logs=[log])
        for step in range(start, 8):
            monitor.step(step)
    counts = log.frame.groupby("step").size()
    assert counts.index.tolist() == [0, 2, 4, 6] and (counts == 3 * 2).all()
    assert isinstance(log.frame, pd.DataFrame)


def test_a_memory_log_refuses_a_second_monitor_at_its_steps_and_keeps_other_setups():
    log = MemoryLog()
    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    x = random_tokens(2, 4, 8, seed=0)
    for metrics in (["mu_rel"], ["stable_rank"]):  # a second setup: other rows, both kept
        monitor = watch(net, blocks="blocks", inputs=x, metrics=metrics, logs=[log])
        monitor.step(0)
    assert log.frame.groupby("metric").size().to_dict() == {"mu_rel": 6, "stable_rank": 6}
    again = watch(net, blocks="blocks", inputs=x, metrics=["mu_rel"], logs=[log])
    with pytest.raises(InputError, match=r"this MemoryLog already holds step 0 .*resume=True"):
        again.step(0)
    assert len(log.frame) == 12
