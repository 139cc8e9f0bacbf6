"""A TransformerLens `TransformerBridge` (TransformerLens 4's model class, also in 3.9), built
around a tiny GPT-2 in memory (no hub): `probe` and `watch` measure the states and patterns of
its own `run_with_cache` (float32, compared exactly), and refuse with the reason what a bridge
cannot do (variants, masks, temperature)."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.lens import is_transformer_bridge
from rankcollapse.measure import ProbeInputs, probe
from rankcollapse.measure.monitor import watch
from rankcollapse.metrics import measure_attention, measure_states

pytest.importorskip(
    "transformer_lens.model_bridge",
    reason='the transformer-lens extra is not installed (pip install -e ".[transformer-lens]")',
)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
STATES = ["res_comp_rel", "mu_rel", "stable_rank"]


def bridge(vocab_size: int = 64):
    """A TransformerBridge around a 2-layer GPT-2 of a config, seeded."""
    from transformer_lens.model_bridge.sources import build_bridge_from_module
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_embd=16, n_layer=2, n_head=2, vocab_size=vocab_size, n_positions=32,
                        bos_token_id=0, eos_token_id=0)  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = GPT2LMHeadModel(config).eval()
    return build_bridge_from_module(model, "GPT2LMHeadModel", hf_config=config)


def by_layer(frame, metric):
    rows = frame[frame.metric == metric].sort_values(["layer", "sample"])
    return {layer: torch.tensor(g.value.to_numpy()) for layer, g in rows.groupby("layer")}


def test_probe_of_a_bridge_is_the_suite_on_its_run_with_cache():
    model = bridge()
    assert is_transformer_bridge(model)
    hooks = sum(len(m._forward_hooks) for m in model.modules())  # the bridge's own
    frame = probe(model, random_tokens=True, n_samples=3, n_tokens=8,
                  metrics=[*STATES, "attn_entropy"], keep_states=True)  # fmt: skip
    assert sum(len(m._forward_hooks) for m in model.modules()) == hooks
    ids, mask = ProbeInputs(random_tokens=True, n_samples=3, n_tokens=8).build(model)
    _, cache = model.run_with_cache(ids)
    names = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(2)]
    for layer, name in enumerate(names):
        assert torch.equal(frame.attrs["states"]["transformer"][layer], cache[name])
        expected = measure_states(cache[name], mask, metrics=STATES)
        for metric in STATES:
            assert torch.equal(by_layer(frame, metric)[layer], expected[metric].value)
    causal = torch.ones(8, 8).tril().bool()
    for layer in (1, 2):
        pattern = cache[f"blocks.{layer - 1}.attn.hook_pattern"]
        real = mask[:, None, :]
        edges = real[..., None, :] & real[..., :, None] & causal
        entropy = measure_attention(pattern, real, edges=edges, metrics=["attn_entropy"])
        expected = entropy["attn_entropy"].value.mean(dim=1)
        torch.testing.assert_close(by_layer(frame, "attn_entropy")[layer], expected,
                                   atol=1e-12, rtol=0)  # fmt: skip
    assert set(frame.model) == {"transformer-bridge"}


def test_watch_of_a_bridge_and_probe_of_its_token_ids_agree():
    model = bridge().train()
    ids = torch.randint(64, (2, 8), generator=torch.Generator().manual_seed(3))
    rows = watch(model, inputs=ids, metrics=["mu_rel"]).step(0)
    frame = probe(model, tokens=ids, metrics=["mu_rel"])
    assert rows["value"].tolist() == frame["value"].tolist()
    assert model.training, "the monitor put the model's mode back"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"variants": "san"}, "variant 'san' changes the blocks, but a TransformerBridge"),
        ({"mask": "window:1"}, "own attention pattern and temperature"),
        ({"temperature": 2.0}, "own attention pattern and temperature"),
    ],
)
def test_what_a_bridge_cannot_do_is_refused_with_the_reason(options, message):
    with pytest.raises(ConfigError, match=message):
        probe(bridge(), random_tokens=True, n_samples=2, n_tokens=8, **options)
