"""One interface for every kind of model (`measure.kinds.Measured`): a new kind is one class
registered in one place, and the probe and the monitor measure it through the one loop
(`measure_batch`); things that are not models, or models that cannot run, are refused with a
sentence before any work."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf import blocks_captured, modes_kept
from rankcollapse.measure import ProbeInputs, probe
from rankcollapse.measure.kinds import KINDS, Measured, as_measured, register_kind
from rankcollapse.measure.monitor import watch
from rankcollapse.metrics import measure_states

STATES = ["res_comp_rel", "mu_rel", "stable_rank"]


class TinyLM(nn.Module):
    """A toy language model: an embedding, then residual linear blocks."""

    def __init__(self, vocab: int = 20, d_model: int = 8, n_blocks: int = 3) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_blocks))
        for p in self.parameters():
            p.data = torch.randn(p.shape, generator=generator, dtype=torch.float64)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return x

    def states(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """Every layer's states by hand: the embedding, then each block's output."""
        x, states = self.embed(ids), []
        states.append(x)
        for block in self.blocks:
            x = block(x)
            states.append(x)
        return states


class TinyKind(Measured):
    """The kind of `TinyLM`: the whole of what a new kind needs."""

    def __init__(self, model: TinyLM, tokenizer=None) -> None:
        self.model, self.name, self.info, self.tokenizer = model, "tiny-lm", {}, tokenizer

    @classmethod
    def accepts(cls, model) -> bool:
        return isinstance(model, TinyLM)

    @classmethod
    def of(cls, model, tokenizer=None) -> Measured:
        return cls(model, tokenizer)

    n_layers = property(lambda self: len(self.model.blocks))
    embedding_size = property(lambda self: self.model.embed.num_embeddings)

    def run_layers(self, input_ids, token_mask, on_layer, settings) -> None:
        with blocks_captured(list(self.model.blocks), on_layer), modes_kept(self.model):
            self.model.train(settings.train_mode)
            with torch.no_grad():
                self.model(input_ids)


@pytest.fixture
def tiny_kind():
    register_kind(TinyKind)
    try:
        yield TinyKind
    finally:
        KINDS.remove(TinyKind)


def by_layer(frame, metric):
    rows = frame[frame.metric == metric].sort_values(["layer", "sample"])
    return {layer: torch.tensor(g.value.to_numpy()) for layer, g in rows.groupby("layer")}


def test_a_new_kind_is_one_class_and_the_probe_and_monitor_measure_it(tiny_kind):
    model = TinyLM()
    frame = probe(model, random_tokens=True, n_samples=3, n_tokens=6, metrics=STATES)
    ids, mask = ProbeInputs(random_tokens=True, n_samples=3, n_tokens=6).build(model)
    with torch.no_grad():
        states = model.states(ids)
    for layer, x in enumerate(states):
        expected = measure_states(x, mask, metrics=STATES)
        for metric in STATES:
            torch.testing.assert_close(by_layer(frame, metric)[layer], expected[metric].value,
                                       atol=1e-12, rtol=0)  # fmt: skip
    assert set(frame.model) == {"tiny-lm"} and frame.layer.max() == 3
    rows = watch(model, inputs=ids, metrics=["mu_rel"]).step(0)
    assert rows["value"].tolist() == frame[frame.metric == "mu_rel"]["value"].tolist()
    with pytest.raises(ConfigError, match="variant 'san' is defined for Hugging Face models"):
        probe(model, random_tokens=True, n_tokens=6, variants="san")
    with pytest.raises(ConfigError, match="measured with its own attention: drop mask"):
        probe(model, random_tokens=True, n_tokens=6, mask="causal")


def test_without_its_registration_the_toy_model_is_refused_with_a_sentence():
    with pytest.raises(InputError, match="a TinyLM .* is not a model the probe knows"):
        probe(TinyLM(), random_tokens=True)


class NoWeights(nn.Module):
    """Looks like a Hugging Face model (a config with a model_type) but holds no parameters."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2Config

        self.config = GPT2Config(n_layer=1)


def meta_gpt2():
    from transformers import GPT2Config, GPT2Model

    with torch.device("meta"):
        return GPT2Model(GPT2Config(n_embd=16, n_layer=2, n_head=2, vocab_size=64))


NOT_MODELS = [
    (lambda: torch.nn.Linear(4, 4), r"a Linear \(a torch module without a config"),
    (lambda: torch.nn.Sequential(torch.nn.Linear(4, 4)), "a Sequential"),
    (lambda: 3, r"an int \(3\) is not a model the probe knows"),
    (lambda: None, "None is not a model the probe knows"),
    (lambda: TinyLM, r"the class TinyLM \(a class, not a model: build one first\)"),
    (lambda: NoWeights(), "NoWeights has no parameters"),
    (meta_gpt2, "parameters on the meta device"),
]


@pytest.mark.parametrize(("make", "message"), NOT_MODELS)
def test_the_probe_refuses_what_it_cannot_run_with_a_sentence(make, message):
    with pytest.raises(InputError, match=message):
        probe(make(), random_tokens=True, n_samples=2, n_tokens=8)


@pytest.mark.parametrize(("make", "message"), NOT_MODELS)
def test_watch_refuses_what_it_cannot_run_with_a_sentence(make, message):
    model = make()
    if type(model) in (nn.Linear, nn.Sequential):  # a module: watch measures it by its blocks
        with pytest.raises(ConfigError, match="declare its blocks, e.g. watch"):
            watch(model, random_tokens=True, n_tokens=8)
        return
    with pytest.raises(InputError, match=message):
        watch(model, random_tokens=True, n_tokens=8)


def test_a_module_with_blocks_on_the_meta_device_is_refused_at_watch():
    net = TinyLM().to("meta")
    with pytest.raises(InputError, match="meta device"):
        watch(net, blocks="blocks", inputs=torch.zeros(1, 4, dtype=torch.long))


def test_a_model_already_measured_is_measured_as_it_is():
    from rankcollapse.hf import tiny_model, wrap_model

    measured = as_measured(wrap_model(tiny_model("bert")))
    assert as_measured(measured) is measured and measured.n_layers == 2
