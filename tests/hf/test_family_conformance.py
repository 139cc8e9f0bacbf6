"""Conformance of every registered family, each on its tiny random-init model (built once).

For every adapter of `ARCHITECTURES`: the captured `transformer` states equal the library's
`output_hidden_states` bit for bit; a self-only mask isolates tokens (or is refused where the
attention bypasses the attention interface); with the attention output projection zeroed, the
variants leave exactly what their definition says; every variant and `qk-rank` run; and the
per-length path decomposition (offered for every family) sums to the model's own output in
float32.
"""

import itertools

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.hf import ARCHITECTURES, VARIANTS, RunSettings, run_batch, wrap_model
from rankcollapse.hf.architectures import block_list, submodule
from rankcollapse.hf.models import tiny_model
from rankcollapse.hf.qk_rank import qk_ranks
from rankcollapse.hf.registry import VOCAB
from rankcollapse.paths import decompose_real

FAMILIES = sorted(ARCHITECTURES)
# The library's last hidden state has the final norm applied, except ViT's (its norm acts on
# last_hidden_state only).
RAW_LAST_STATE = {"vit"}


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    name = request.param
    return name, wrap_model(tiny_model(name), name=f"tiny-{name}")


def _inputs(loaded, seed=1):
    gen = torch.Generator().manual_seed(seed)
    if loaded.arch.inputs == "pixels":
        size = loaded.model.config.image_size
        return torch.randn(2, 3, size, size, generator=gen), "pixel_values"
    return torch.randint(3, VOCAB, (2, 7), generator=gen), "input_ids"


def _run(loaded, inputs, **options):
    got = []
    run_batch(loaded, inputs, on_layer=got.append, settings=RunSettings(**options))
    return got


def test_transformer_states_equal_output_hidden_states_bit_for_bit(family):
    name, loaded = family
    inputs, key = _inputs(loaded)
    got = [c.states for c in _run(loaded, inputs)]
    with torch.no_grad():
        library = loaded.model(**{key: inputs}, output_hidden_states=True).hidden_states
    assert len(got) == len(library) == loaded.n_layers + 1
    last = got[-1]
    if loaded.arch.final_norm and name not in RAW_LAST_STATE:
        with torch.no_grad():
            last = submodule(loaded.model, loaded.arch.final_norm)(last)
    for layer, (ours, theirs) in enumerate(zip([*got[:-1], last], library, strict=True)):
        assert torch.equal(ours, theirs), f"{name}: layer {layer} differs"


def test_self_only_mask_isolates_tokens_or_is_refused(family):
    _name, loaded = family
    inputs, _ = _inputs(loaded)
    n = _run(loaded, inputs)[0].states.shape[1]
    eye = torch.eye(n, dtype=torch.bool)
    if not loaded.arch.attention_interface:
        with pytest.raises(ConfigError, match="does not support masks or temperature"):
            _run(loaded, inputs, mask=eye)
        return
    got = _run(loaded, inputs, mask=eye, attention=True)
    for capture in got[1:]:
        assert torch.equal(capture.attention, torch.eye(n).expand_as(capture.attention))
    if loaded.arch.inputs == "tokens":  # changing the last token leaves the others as they were
        changed = inputs.clone()
        changed[:, -1] = (changed[:, -1] + 1) % VOCAB
        other = _run(loaded, changed, mask=eye)
        for ours, theirs in zip(got, other, strict=True):
            assert torch.equal(ours.states[:, :-1], theirs.states[:, :-1])


@pytest.fixture(scope="module")
def zeroed(family):
    """The family's tiny model with its attention output projection zeroed: A(x) = b_O."""
    name, _ = family
    loaded = wrap_model(tiny_model(name), name=f"zeroed-{name}")
    bias = None
    with torch.no_grad():
        for block in block_list(loaded.model, loaded.arch):
            if loaded.arch.projection == "einsum":  # XLNet: o is a Parameter of rel_attn
                out = weight = submodule(block, loaded.arch.attention).o
            else:
                out = submodule(block, loaded.arch.attention_out)
                weight = out.weight
            weight.zero_()
            bias = getattr(out, "bias", None)
    return name, loaded, bias


def test_without_value_path_san_makes_every_token_equal_exactly(zeroed):
    name, loaded, _ = zeroed
    inputs, _ = _inputs(loaded)
    for capture in _run(loaded, inputs, variant="san")[1:]:
        x = capture.states
        assert torch.equal(x, x[:, :1].expand_as(x)), f"{name}: layer {capture.layer}"


def test_without_value_path_skip_only_adds_the_output_bias_exactly(zeroed):
    name, loaded, bias = zeroed
    inputs, _ = _inputs(loaded)
    states = [c.states for c in _run(loaded, inputs, variant="wu:san+skip")]
    for before, after in itertools.pairwise(states):
        expected = before if bias is None else before + bias
        assert torch.equal(after, expected), name


def test_every_variant_streams_every_layer(family):
    _name, loaded = family
    inputs, _ = _inputs(loaded)
    hooks_before = _hooks(loaded.model)
    for variant in VARIANTS.values():
        if variant.family == "dong-authors" and not loaded.arch.authors_surgery:
            with pytest.raises(ConfigError, match="covers bert, albert and xlnet"):
                _run(loaded, inputs, variant=variant)
            continue
        got = _run(loaded, inputs, variant=variant, attention=True)
        assert [c.layer for c in got] == list(range(loaded.n_layers + 1))
        for capture in got[1:]:
            sums = capture.attention.sum(-1)
            torch.testing.assert_close(sums, torch.ones_like(sums))
    assert _hooks(loaded.model) == hooks_before


def _hooks(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_qk_rank_reads_every_head_of_every_block(family):
    _name, loaded = family
    df = qk_ranks(loaded)
    ranks = df[df.metric == "numerical_rank"]
    n_blocks = len(block_list(loaded.model, loaded.arch))
    assert len(ranks) == n_blocks * loaded.model.config.num_attention_heads
    assert ranks.value.tolist() == [8.0] * len(ranks)  # random heads: full rank d_head = 8
    assert ranks.layer.min() == 1 and ranks["head"].min() == 1


def test_per_length_decomposition_sums_to_the_output_in_float32(family):
    name, loaded = family
    inputs, key = _inputs(loaded)
    parts = decompose_real(loaded, inputs)
    with torch.no_grad():
        library = loaded.model(**{key: inputs}, output_hidden_states=True).hidden_states
    reference = library[-1]
    if loaded.arch.final_norm:  # the decomposition ends at the raw last block output
        reference = _run(loaded, inputs)[-1].states
    error = (parts.output - reference).abs().max() / reference.abs().max()
    assert parts.components.dtype == torch.float32
    assert error < 1e-6, f"{name}: relative error {float(error):.2e}"
