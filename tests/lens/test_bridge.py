"""A TransformerLens `TransformerBridge` (TransformerLens 4's model class, also in 3.9), around a
tiny GPT-2 and around TransformerLens's own native model, both built in memory (no hub):
`run_bridge`, `probe` and `watch` measure the states and patterns of its own `run_with_cache`
(compared exactly), and refuse with the reason what a bridge cannot do (variants, masks,
temperature)."""

from __future__ import annotations

import pytest
import torch
from lens_models import BRIDGES, TL_REASON, bridge

from rankcollapse.errors import ConfigError
from rankcollapse.hf import RunSettings
from rankcollapse.lens import as_bridge, is_transformer_bridge, run_bridge
from rankcollapse.measure import ProbeInputs, probe
from rankcollapse.measure.monitor import watch
from rankcollapse.metrics import measure_attention, measure_states

pytest.importorskip("transformer_lens.model_bridge", reason=TL_REASON)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
STATES = ["res_comp_rel", "mu_rel", "stable_rank"]


def by_layer(frame, metric):
    rows = frame[frame.metric == metric].sort_values(["layer", "sample"])
    return {layer: torch.tensor(g.value.to_numpy()) for layer, g in rows.groupby("layer")}


def resid_names(model) -> list[str]:
    """Layer 0 and every block's output, as its cache names them."""
    n_layers = model.cfg.n_layers
    return ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(n_layers)]


@pytest.mark.parametrize("source", BRIDGES)
def test_run_bridge_streams_the_states_and_patterns_of_run_with_cache(source):
    model = bridge(source)
    ids = torch.randint(model.cfg.d_vocab, (2, 8), generator=torch.Generator().manual_seed(1))
    seen = {}

    def on_layer(c):
        seen[c.layer] = (c.states.clone(), c.attention)

    run_bridge(as_bridge(model), ids, on_layer=on_layer, settings=RunSettings(attention=True))
    _, cache = model.run_with_cache(ids)
    assert sorted(seen) == list(range(model.cfg.n_layers + 1))
    assert seen[0][1] is None
    for layer, name in enumerate(resid_names(model)):
        assert torch.equal(seen[layer][0], cache[name])
        if layer:
            assert torch.equal(seen[layer][1], cache[f"blocks.{layer - 1}.attn.hook_pattern"])


@pytest.mark.parametrize("source", BRIDGES)
def test_probe_of_a_bridge_is_the_suite_on_its_run_with_cache(source):
    model = bridge(source)
    assert is_transformer_bridge(model)
    hooks = sum(len(m._forward_hooks) for m in model.modules())  # the bridge's own
    frame = probe(model, random_tokens=True, n_samples=3, n_tokens=8,
                  metrics=[*STATES, "attn_entropy"], keep_states=True)  # fmt: skip
    assert sum(len(m._forward_hooks) for m in model.modules()) == hooks
    ids, mask = ProbeInputs(random_tokens=True, n_samples=3, n_tokens=8).build(model)
    _, cache = model.run_with_cache(ids)
    for layer, name in enumerate(resid_names(model)):
        assert torch.equal(frame.attrs["states"]["transformer"][layer], cache[name])
        expected = measure_states(cache[name], mask, metrics=STATES)
        for metric in STATES:
            assert torch.equal(by_layer(frame, metric)[layer], expected[metric].value)
    causal = torch.ones(8, 8).tril().bool()
    for layer in range(1, model.cfg.n_layers + 1):
        pattern = cache[f"blocks.{layer - 1}.attn.hook_pattern"]
        real = mask[:, None, :]
        edges = real[..., None, :] & real[..., :, None] & causal
        entropy = measure_attention(pattern, real, edges=edges, metrics=["attn_entropy"])
        expected = entropy["attn_entropy"].value.mean(dim=1)
        torch.testing.assert_close(by_layer(frame, "attn_entropy")[layer], expected,
                                   atol=1e-12, rtol=0)  # fmt: skip
    assert set(frame.model) == {"transformer-bridge"}


@pytest.mark.parametrize("source", BRIDGES)
def test_watch_of_a_bridge_logs_its_run_with_cache_numbers_as_probe_does(source):
    model = bridge(source).train()
    ids = torch.randint(model.cfg.d_vocab, (2, 8), generator=torch.Generator().manual_seed(3))
    rows = watch(model, inputs=ids, metrics=["mu_rel"]).step(0)
    assert model.training, "the monitor put the model's mode back"
    _, cache = model.eval().run_with_cache(ids)
    for layer, name in enumerate(resid_names(model)):
        expected = measure_states(cache[name], None, metrics=["mu_rel"])["mu_rel"].value
        assert torch.equal(by_layer(rows, "mu_rel")[layer], expected)
    assert rows["value"].tolist() == probe(model, tokens=ids, metrics=["mu_rel"])["value"].tolist()


def test_probe_of_a_bridges_token_ids_is_that_of_the_same_ids_drawn():
    model = bridge()
    drawn = probe(model, random_tokens=True, n_samples=2, n_tokens=8, metrics=STATES)
    ids, mask = ProbeInputs(random_tokens=True, n_samples=2, n_tokens=8).build(model)
    assert probe(model, tokens=ids, token_mask=mask, metrics=STATES).equals(drawn)


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
        probe(bridge("gpt2"), random_tokens=True, n_samples=2, n_tokens=8, **options)
