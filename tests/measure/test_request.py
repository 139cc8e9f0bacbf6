"""The checked request (`measure.request`): every value checked before any model loads, on the
command line and in Python; the mask built once, metric names resolved once; and the caller's
own token ids measured (`probe(model, tokens=ids)`)."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.cli import main
from rankcollapse.errors import ConfigError, InputError, RankCollapseError, UnknownNameError
from rankcollapse.measure import ProbeInputs, probe, resolve_probe
from rankcollapse.measure.monitor import watch


@pytest.fixture
def no_load(monkeypatch):
    """Any model load fails the test: the values must be refused before."""
    import importlib

    probe_module = importlib.import_module("rankcollapse.measure.probe")  # not the function

    def refuse(*args, **kwargs):
        raise AssertionError("a model loaded before the values were checked")

    monkeypatch.setattr(probe_module, "load_resolved", refuse)


@pytest.mark.parametrize("temperature", [-1, 0, math.inf, math.nan, "2", True])
def test_a_bad_temperature_is_refused_before_any_model_loads(no_load, temperature):
    with pytest.raises(ConfigError, match=r"temperature must be > 0 and finite \(a number\)"):
        probe("minilm", temperature=temperature)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--temperature", "-1"], "temperature must be > 0 and finite (a number), got -1.0"),
        (["--mask", "sinks:20:1"], "n_sinks must be at most the number of tokens n=16"),
        (["--batch-size", "0"], "--batch-size is 0"),
    ],
)
def test_the_command_line_refuses_a_bad_value_before_loading_or_printing(
    no_load, capsys, tmp_path, argv, message
):
    assert main(["probe", "minilm", *argv, "--n-tokens", "16", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and "probing" not in err and "loading" not in err
    assert not (tmp_path / "o").exists(), "no folder claimed"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"train_mode": "yes"}, "train_mode takes True or False, got 'yes'"),
        ({"keep_states": 1}, "keep_states takes True or False"),
        ({"mask": 3}, "mask takes a spec such as 'causal'"),
        ({"mask": torch.ones(3, 4, dtype=torch.bool)}, r"square \(n, n\)"),
        ({"metrics": ["mu_rell"]}, "Did you mean 'mu_rel'"),
    ],
)
def test_every_value_of_the_request_is_checked_where_it_enters(no_load, options, message):
    with pytest.raises(RankCollapseError, match=message):
        probe("minilm", **options)


def tiny_bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, vocab_size=50)  # fmt: skip
    return BertModel(config).eval()


def test_the_mask_is_built_once_and_metric_names_resolved_once(monkeypatch):
    import rankcollapse.measure.request as request_module
    from rankcollapse.masks import MaskSpec

    builds, lookups = [], []
    build, get_metric = MaskSpec.build, request_module.get_metric
    monkeypatch.setattr(MaskSpec, "build", lambda self, n: builds.append(n) or build(self, n))
    monkeypatch.setattr(request_module, "get_metric", lambda n: lookups.append(n) or get_metric(n))
    from rankcollapse.metrics import registry

    monkeypatch.setattr(registry, "unknown_name", lambda *a: AssertionError("looked up again"))
    frame = probe(tiny_bert(), variants="san,transformer", mask="window:1", random_tokens=True,
                  n_samples=3, n_tokens=8, batch_size=1, metrics=["mu_rel", "attn_entropy"])  # fmt: skip
    assert builds == [8] and lookups == ["mu_rel", "attn_entropy"]
    assert set(frame.metric) == {"mu_rel", "attn_entropy"} and frame["sample"].nunique() == 3


def test_the_request_holds_typed_values():
    request = resolve_probe("san", "causal", "mu_rel,attn_entropy", temperature=2)
    assert request.temperature == 2.0 and isinstance(request.temperature, float)
    assert [m.kind for m in request.state_metrics + request.attention_metrics] == [
        "states",
        "attention",
    ]
    mask, label = request.mask_for(5)
    assert label == "causal" and request.mask_for(5)[0] is mask


def test_probe_measures_the_callers_token_ids_with_their_mask():
    model = tiny_bert()
    options = {"n_samples": 3, "n_tokens": 8, "metrics": ["mu_rel", "attn_entropy"]}
    drawn = probe(model, random_tokens=True, **options)
    ids, mask = ProbeInputs(random_tokens=True, n_samples=3, n_tokens=8).build(model)
    given = probe(model, tokens=ids, token_mask=mask, metrics=options["metrics"])
    assert given.equals(drawn)
    padded = mask.clone()
    padded[1, 5:] = False
    short = probe(model, tokens=ids, token_mask=padded, metrics=["mu_rel"])
    alone = probe(model, tokens=ids[1:2, :5], metrics=["mu_rel"])
    got = short[short["sample"] == 1].sort_values("layer")["value"].to_numpy()
    assert got == pytest.approx(alone.sort_values("layer")["value"].to_numpy(), rel=1e-5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tokens": torch.ones(2, 4)}, "tokens holds torch.float32 values, not token ids"),
        ({"tokens": torch.ones(4, dtype=torch.long)}, r"tokens must be token ids, .* \(b, n\)"),
        ({"tokens": torch.full((1, 4), 60)}, "tokens holds token ids from 60 to 60 but .* 50"),
        (
            {"tokens": torch.ones(1, 4, dtype=torch.long), "token_mask": torch.ones(1, 5)},
            r"pass a boolean mask of shape \(1, 4\)",
        ),
        (
            {"tokens": torch.ones(1, 4, dtype=torch.long), "random_tokens": True},
            "tokens= are the inputs themselves; drop random_tokens",
        ),
    ],
)
def test_bad_token_ids_are_refused_with_a_sentence(options, message):
    with pytest.raises((InputError, ConfigError), match=message):
        probe(tiny_bert(), metrics=["mu_rel"], **options)


def test_watch_names_its_own_argument_in_the_same_checks():
    with pytest.raises(InputError, match="inputs holds torch.float32 values"):
        watch(tiny_bert(), inputs=torch.ones(2, 4))


def test_resolve_probe_parses_names_once_into_typed_values():
    from rankcollapse.hf import VARIANTS
    from rankcollapse.masks import MaskSpec

    request = resolve_probe("san,transformer", "causal_window:1", "res_comp_rel,attn_entropy")
    assert request.variants == (VARIANTS["san"], VARIANTS["transformer"])
    assert request.mask == MaskSpec("causal_window", (1,))
    assert [m.name for m in request.metrics] == list(request.names)
    assert set(request.names) == {"res_comp_rel", "attn_entropy"}
    assert [m.kind for m in request.metrics] == ["states", "attention"]
    assert resolve_probe(request.variants, request.mask, request.names) == request
    assert resolve_probe(mask="model").mask is None
    with pytest.raises(UnknownNameError, match="unknown variant 'sna'.*Did you mean 'san'"):
        resolve_probe(["sna"])
