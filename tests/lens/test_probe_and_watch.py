"""`probe` and `watch` take a TransformerLens HookedTransformer (3.x; its tests skip on 4.x,
which removed it) and an nnsight wrapper as they take a Hugging Face model: the
HookedTransformer's numbers are the metric suite on its `run_with_cache` states and patterns
(float64, 1e-12), the nnsight wrapper's are those of the model it wraps; hooks and modes are
left as they were. The bridge's are tests/lens/test_bridge.py."""

from __future__ import annotations

import pytest
import torch

from lens_models import TL_REASON, hooked_lens, hooked_transformer

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.lens import as_hooked
from rankcollapse.measure import ProbeInputs, probe
from rankcollapse.measure.monitor import MemoryLog, watch
from rankcollapse.metrics import measure_attention, measure_states

NNSIGHT_REASON = 'the nnsight extra is not installed (pip install -e ".[nnsight]")'
STATES = ["res_comp_rel", "mu_rel", "stable_rank"]


def by_layer(frame, metric):
    rows = frame[frame.metric == metric].sort_values(["layer", "sample"])
    return {layer: torch.tensor(g.value.to_numpy()) for layer, g in rows.groupby("layer")}


@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")
def test_probe_of_a_hooked_transformer_is_the_suite_on_its_run_with_cache():
    model = hooked_transformer()
    frame = probe(model, random_tokens=True, n_samples=3, n_tokens=8,
                  metrics=[*STATES, "attn_entropy"], keep_states=True)  # fmt: skip
    ids, mask = ProbeInputs(random_tokens=True, n_samples=3, n_tokens=8).build(as_hooked(model))
    _, cache = model.run_with_cache(ids)
    names = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(3)]
    for layer, name in enumerate(names):
        kept = frame.attrs["states"]["transformer"][layer]
        torch.testing.assert_close(kept, cache[name], atol=1e-12, rtol=0)
        expected = measure_states(cache[name], mask, metrics=STATES)
        for metric in STATES:
            torch.testing.assert_close(by_layer(frame, metric)[layer], expected[metric].value,
                                       atol=1e-12, rtol=0)  # fmt: skip
    for layer in (1, 2, 3):
        pattern = cache[f"blocks.{layer - 1}.attn.hook_pattern"]
        real = mask[:, None, :]
        edges = real[..., None, :] & real[..., :, None] & torch.ones(8, 8).tril().bool()
        entropy = measure_attention(pattern, real, edges=edges, metrics=["attn_entropy"])
        expected = entropy["attn_entropy"].value.mean(dim=1)
        torch.testing.assert_close(by_layer(frame, "attn_entropy")[layer], expected,
                                   atol=1e-12, rtol=0)  # fmt: skip
    assert set(frame.model) == {"hooked-transformer"}
    assert sum(len(m._forward_hooks) for m in model.modules()) == 0


@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")
def test_watch_of_a_hooked_transformer_logs_the_run_with_cache_numbers():
    model = hooked_transformer(attn_only=True).train()
    ids = torch.randint(50, (2, 8), generator=torch.Generator().manual_seed(3))
    log = MemoryLog()
    monitor = watch(model, inputs=ids, metrics=STATES, variants=["transformer", "san"],
                    every=5, logs=[log])  # fmt: skip
    frame = monitor.step(0)
    _, cache = model.run_with_cache(ids)
    plain = frame[frame.variant == "transformer"]
    for layer in range(4):
        name = "blocks.0.hook_resid_pre" if layer == 0 else f"blocks.{layer - 1}.hook_resid_post"
        expected = measure_states(cache[name], None, metrics=["mu_rel"])["mu_rel"].value
        torch.testing.assert_close(by_layer(plain, "mu_rel")[layer], expected, atol=1e-12, rtol=0)
    assert model.training, "the monitor put the model's mode back"
    assert len(log.frame) == 2 * 4 * 2 * 3  # variants x layers x samples x metrics


@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")
def test_a_variant_the_hooked_transformer_cannot_realise_is_refused_at_watch():
    with pytest.raises(ConfigError, match="attention-only"):
        watch(hooked_transformer(attn_only=True), random_tokens=True, n_tokens=8,
              variants=["san+mlp"])  # fmt: skip


def tiny_gpt2(vocab_size: int = 64):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_embd=16, n_layer=2, n_head=2, vocab_size=vocab_size, n_positions=32,
                        bos_token_id=0, eos_token_id=0)  # fmt: skip
    return GPT2LMHeadModel(config).eval()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_nnsight_wrapper_is_probed_and_watched_as_the_model_it_wraps():
    nnsight = pytest.importorskip("nnsight", reason=NNSIGHT_REASON)
    model = tiny_gpt2()
    options = {"random_tokens": True, "n_samples": 2, "n_tokens": 8, "metrics": STATES}
    wrapped = probe(nnsight.NNsight(model), variants="san,transformer", **options)
    alone = probe(model, variants="san,transformer", **options)
    assert wrapped.equals(alone)
    ids = torch.randint(64, (2, 8), generator=torch.Generator().manual_seed(0))
    rows = [watch(m, inputs=ids, metrics=STATES).step(0) for m in (nnsight.NNsight(model), model)]
    assert rows[0].equals(rows[1])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:LanguageModel is deprecated")
def test_a_language_model_brings_its_tokenizer():
    nnsight = pytest.importorskip("nnsight", reason=NNSIGHT_REASON)
    from transformers import AutoTokenizer

    from rankcollapse.hf.models import _minilm_path

    tokenizer = AutoTokenizer.from_pretrained(_minilm_path(), local_files_only=True)
    model = tiny_gpt2(vocab_size=len(tokenizer))
    wrapped = nnsight.LanguageModel(model, tokenizer=tokenizer)
    frame = probe(wrapped, n_samples=2, n_tokens=8, metrics=["mu_rel"])
    assert frame.equals(probe(model, tokenizer=tokenizer, n_samples=2, n_tokens=8,
                              metrics=["mu_rel"]))  # fmt: skip


@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")
def test_a_hooked_transformer_without_blocks_is_refused_with_a_sentence():
    for model in (hooked_transformer(n_layers=0), hooked_transformer()):
        model.blocks = torch.nn.ModuleList()  # the second: blocks taken away after building
        for measure in (probe, watch):
            with pytest.raises(InputError, match=r"has no blocks \(n_layers=0\)"):
                measure(model, random_tokens=True, n_tokens=8)


@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")
def test_probe_of_a_hooked_transformers_token_ids_is_that_of_the_same_ids_drawn():
    model = hooked_transformer()
    drawn = probe(model, random_tokens=True, n_samples=2, n_tokens=8, metrics=STATES)
    ids, mask = ProbeInputs(random_tokens=True, n_samples=2, n_tokens=8).build(model)
    assert probe(model, tokens=ids, token_mask=mask, metrics=STATES).equals(drawn)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_nnsight_wrapper_is_probed_on_the_callers_token_ids():
    nnsight = pytest.importorskip("nnsight", reason=NNSIGHT_REASON)
    model = tiny_gpt2()
    ids = torch.randint(64, (2, 8), generator=torch.Generator().manual_seed(0))
    wrapped = probe(nnsight.NNsight(model), tokens=ids, metrics=STATES)
    assert wrapped.equals(probe(model, tokens=ids, metrics=STATES))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_nnsight_wrapping_a_module_the_probe_does_not_know_is_refused_with_a_sentence():
    nnsight = pytest.importorskip("nnsight", reason=NNSIGHT_REASON)
    with pytest.raises(InputError, match="this nnsight NNsight wraps a Linear, not a model"):
        probe(nnsight.NNsight(torch.nn.Linear(4, 4)), random_tokens=True)
    with pytest.raises(ConfigError, match="a Linear is not a Hugging Face model.*declare its"):
        watch(nnsight.NNsight(torch.nn.Linear(4, 4)), random_tokens=True)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_an_nnsight_tokenizer_without_a_vocabulary_gives_way_to_the_configs():
    nnsight = pytest.importorskip("nnsight", reason=NNSIGHT_REASON)
    from rankcollapse.lens import unwrap_nnsight

    class Empty:  # what a LanguageModel of a folder saved without tokenizer files holds
        def __len__(self):
            return 0

    wrapped = nnsight.NNsight(tiny_gpt2())
    object.__setattr__(wrapped, "tokenizer", Empty())
    assert unwrap_nnsight(wrapped)[1] is None
    frame = probe(wrapped, random_tokens=True, n_samples=2, n_tokens=8, metrics=["mu_rel"])
    assert frame.equals(probe(tiny_gpt2(), random_tokens=True, n_samples=2, n_tokens=8,
                              metrics=["mu_rel"]))  # fmt: skip


@pytest.mark.parametrize("name", ["HookedTransformerConfig", "TransformerBridgeConfig"])
def test_a_transformer_lens_config_is_not_a_model(name):
    tl = pytest.importorskip("transformer_lens", reason=TL_REASON)
    if name == "HookedTransformerConfig":
        tl = hooked_lens()
    config = getattr(tl, name)(n_layers=1, d_model=8, n_ctx=8, d_head=4, d_vocab=10,
                               act_fn="gelu")  # fmt: skip
    for measure in (probe, watch):
        with pytest.raises(InputError, match=f"a {name} is not a model the probe"):
            measure(config, random_tokens=True, n_tokens=8)
