"""The shipped pretrained models, offline (slow: MiniLM ~4 s, SmolLM2 ~20 s, each loaded once)."""

import pytest
import torch

from rankcollapse.hf import RunSettings, load_model, load_windows, run_batch
from rankcollapse.masks import from_matrix
from rankcollapse.measure import probe

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def minilm():
    return load_model("minilm")


@pytest.fixture(scope="session")
def smollm2():
    return load_model("smollm2")


def captured(loaded, ids, **kw):
    got = []
    run_batch(loaded, ids, on_layer=got.append, settings=RunSettings(**kw))
    return [c.states for c in got]


def test_minilm_transformer_states_equal_output_hidden_states(minilm):
    ids, _ = load_windows(minilm.tokenizer, n_samples=2, n_tokens=32)
    with torch.no_grad():
        ref = minilm.model(input_ids=ids, output_hidden_states=True).hidden_states
    ours = captured(minilm, ids)
    assert len(ours) == len(ref) == 7
    assert all(torch.equal(a, b) for a, b in zip(ours, ref, strict=True))
    # The custom attention (needed for probabilities or masks) differs from the default SDPA
    # kernel only at float32 rounding.
    custom = captured(minilm, ids, attention=True)
    for a, b in zip(custom, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_minilm_probe_shows_collapse_without_skip(minilm):
    df = probe(
        minilm, variants=["san", "transformer"], n_samples=4, n_tokens=64, metrics=["res_comp_rel"]
    )
    last = df[df["layer"] == 6].groupby("variant")["value"].mean()
    assert last["san"] < 1e-3
    assert last["transformer"] > 0.1


def test_smollm2_loads_offline_as_a_quantized_llama(smollm2):
    assert smollm2.arch.name == "llama" and smollm2.n_layers == 30
    assert "4-bit GGUF" in smollm2.info["quantized"]


def test_smollm2_states_match_library_and_a_self_only_mask_isolates_tokens(smollm2):
    ids, _ = load_windows(smollm2.tokenizer, n_samples=1, n_tokens=16)
    with torch.no_grad():
        ref = smollm2.model(input_ids=ids, output_hidden_states=True).hidden_states
    ours = captured(smollm2, ids)
    assert all(torch.equal(a, b) for a, b in zip(ours[:-1], ref[:-1], strict=True))
    norm = smollm2.model.get_submodule(smollm2.arch.final_norm)
    assert torch.equal(norm(ours[-1]), ref[-1])
    # With a self-only mask no token sees any other, through all 30 layers.
    self_only = from_matrix(torch.eye(16, dtype=torch.bool))
    other = ids.clone()
    other[0, 10] = (other[0, 10] + 1) % len(smollm2.tokenizer)
    a = captured(smollm2, ids, mask=self_only)[-1]
    b = captured(smollm2, other, mask=self_only)[-1]
    keep = [i for i in range(16) if i != 10]
    assert not torch.equal(a[0, 10], b[0, 10])
    assert torch.equal(a[0, keep], b[0, keep])


def test_corpus_is_tokenised_once_per_tokenizer(minilm):
    """A second probe on the same model reuses the corpus's token ids (same windows, no call)."""
    first, _ = load_windows(minilm.tokenizer, n_samples=3, n_tokens=16, seed=1)
    calls = []

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def __call__(self, *args, **kwargs):
            calls.append(1)
            return self.inner(*args, **kwargs)

        def __len__(self):
            return len(self.inner)

    counting = Counting(minilm.tokenizer)
    again, _ = load_windows(minilm.tokenizer, n_samples=3, n_tokens=16, seed=1)
    load_windows(counting, n_samples=3, n_tokens=16)
    load_windows(counting, n_samples=3, n_tokens=16)
    assert torch.equal(first, again)
    assert len(calls) == 1  # a different tokenizer object is tokenised once, then reused
