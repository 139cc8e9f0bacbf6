"""probe(): tidy frame, pads never enter a metric, and every bad input fails early and clearly."""

import pandas as pd
import pytest
import torch

from rankcollapse.errors import InputError, UnknownNameError
from rankcollapse.hf import RunSettings, load_model, load_windows, run_batch, wrap_model
from rankcollapse.masks import causal, complete
from rankcollapse.measure import probe
from rankcollapse.metrics import measure_states

TEXT = (
    "The cat sat on the warm mat and watched the birds outside the window all afternoon.\n\n"
    "Rain fell on the old town.\n\n"
    "Every morning the baker lit the oven before dawn, and the smell of bread filled the street."
)


@pytest.fixture(scope="module")
def tokenizer():
    return load_model("minilm").tokenizer  # cached per process; ~1 s


@pytest.fixture(scope="module")
def tiny_bert(tokenizer):
    from transformers import BertConfig, BertModel

    config = BertConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        vocab_size=len(tokenizer),
        max_position_embeddings=64,
    )
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertModel(config).eval()
    return wrap_model(model, name="tiny-bert", tokenizer=tokenizer)


def test_probe_returns_tidy_rows_for_every_variant_layer_sample_metric(tiny_bert):
    df = probe(
        tiny_bert,
        variants=["san", "transformer"],
        n_samples=3,
        n_tokens=16,
        metrics=["res_comp_rel", "attn_entropy"],
    )
    assert list(df.columns[:10]) == [
        "model",
        "init",
        "variant",
        "mask",
        "temperature",
        "mode",
        "layer",
        "layer_kind",
        "sample",
        "metric",
    ]
    states = df[df["metric"] == "res_comp_rel"]
    assert len(states) == 2 * 3 * 3  # variants x layers x samples
    assert set(df.loc[df["layer"] == 0, "layer_kind"]) == {"embedding"}
    attention = df[df["metric"] == "attn_entropy"]
    assert sorted(attention["layer"].unique()) == [1, 2]  # no attention before block 1


def test_padded_batch_gives_the_same_metrics_as_unpadded_sequences(tiny_bert):
    metrics = ["res_comp_rel", "mu_rel", "stable_rank", "abs_cos_mean"]
    batch = probe(tiny_bert, padded=True, text=TEXT, n_samples=3, n_tokens=32, metrics=metrics)
    paragraphs = TEXT.split("\n\n")
    for sample, paragraph in enumerate(paragraphs):
        alone = probe(
            tiny_bert, padded=True, text=paragraph, n_samples=1, n_tokens=32, metrics=metrics
        )
        mine = batch[batch["sample"] == sample].reset_index(drop=True)
        assert mine[["layer", "metric"]].equals(alone[["layer", "metric"]])
        torch.testing.assert_close(
            torch.tensor(mine["value"].to_numpy()),
            torch.tensor(alone["value"].to_numpy()),
            rtol=1e-4,
            atol=1e-6,
        )


def test_pads_never_enter_a_metric_even_under_an_injected_mask(tiny_bert, tokenizer):
    ids, mask = load_windows(tokenizer, text=TEXT, n_samples=2, n_tokens=8)
    padded = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    token_mask = torch.cat([mask, torch.zeros(2, 3, dtype=torch.bool)], dim=1)
    short, long = [], []
    run_batch(tiny_bert, ids, mask, on_layer=short.append, settings=RunSettings(mask=complete(8)))
    run_batch(
        tiny_bert, padded, token_mask, on_layer=long.append, settings=RunSettings(mask=complete(11))
    )
    for a, b in zip(short, long, strict=True):
        torch.testing.assert_close(
            measure_states(a.states, mask)["res_comp_rel"].value,
            measure_states(b.states, token_mask)["res_comp_rel"].value,
        )


def test_keep_states_returns_every_layer(tiny_bert):
    df = probe(tiny_bert, n_samples=2, n_tokens=8, metrics=["mu"], keep_states=True)
    states = df.attrs["states"]["transformer"]
    assert len(states) == 3 and states[0].shape == (2, 8, 32)


def test_windows_hold_exactly_n_real_tokens_and_depend_on_seed(tokenizer):
    a, mask = load_windows(tokenizer, n_samples=32, n_tokens=128, seed=0)
    b, _ = load_windows(tokenizer, n_samples=32, n_tokens=128, seed=1)
    assert a.shape == (32, 128) and bool(mask.all())
    assert not torch.equal(a, b)


def test_random_tokens_avoid_special_ids(tokenizer):
    ids, _ = load_windows(tokenizer, n_samples=4, n_tokens=64, random_tokens=True)
    assert not set(ids.flatten().tolist()) & set(tokenizer.all_special_ids)


def test_mask_larger_than_the_context_is_rejected(tiny_bert):
    with pytest.raises(
        InputError, match="the mask is for 200 tokens .* but the input has 16 tokens"
    ):
        probe(tiny_bert, n_samples=2, n_tokens=16, mask=causal(200))


def test_more_tokens_than_the_model_has_positions_is_rejected(tiny_bert):
    with pytest.raises(
        InputError, match="100 tokens exceed the context of 'tiny-bert' \\(64 positions\\)"
    ):
        probe(tiny_bert, n_samples=1, n_tokens=100)


def test_empty_text_file_is_rejected(tiny_bert, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(InputError, match="empty.txt' is empty"):
        probe(tiny_bert, text=empty, n_samples=1, n_tokens=8)


def test_too_few_tokens_says_how_many_there_are(tokenizer):
    n_real = len(tokenizer(TEXT, add_special_tokens=False)["input_ids"])
    with pytest.raises(InputError, match=f"has {n_real} tokens with this tokenizer.*fewer samples"):
        load_windows(tokenizer, text=TEXT, n_samples=4, n_tokens=32)


def test_unknown_metric_is_rejected_before_loading(tiny_bert):
    with pytest.raises(UnknownNameError, match="unknown metric 'res_comp_rell'"):
        probe(tiny_bert, metrics=["res_comp_rell"])


def test_bad_mask_spec_fails_before_the_model_loads():
    with pytest.raises(UnknownNameError, match="mask"):
        probe("no-such-model", mask="windw:1", n_tokens=16)  # the mask error comes first


def test_metrics_measured_beside_the_forward_equal_the_suite_on_its_hidden_states(tiny_bert):
    # the probe's values are bit for bit those of the suite on the model's own hidden
    # states, batches in order
    df = probe(tiny_bert, random_tokens=True, n_samples=5, n_tokens=12, batch_size=2)
    ids, mask = load_windows(tiny_bert.tokenizer, n_samples=5, n_tokens=12, random_tokens=True)
    with torch.no_grad():
        out = tiny_bert.model(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True)
    assert sorted(df["layer"].unique()) == list(range(len(out.hidden_states)))
    for layer, x in enumerate(out.hidden_states):
        rows = df[df["layer"] == layer]
        for name, result in measure_states(x, mask, source_dtype=x.dtype).items():
            got = rows[rows["metric"] == name].sort_values("sample")
            assert got["sample"].tolist() == list(range(5))
            assert torch.equal(torch.tensor(got["value"].to_numpy()), result.value), (layer, name)


def test_an_error_in_a_layer_metric_reaches_the_caller(tiny_bert, monkeypatch):
    import importlib

    probe_module = importlib.import_module("rankcollapse.measure.layers")

    def broken(*args, **kwargs):
        raise InputError("x has 1 NaN values")

    monkeypatch.setattr(probe_module, "measure_states", broken)
    with pytest.raises(InputError, match="NaN"):
        probe(tiny_bert, random_tokens=True, n_samples=2, n_tokens=8)


def test_a_probe_checks_its_mask_once_for_every_variant_and_batch(tiny_bert, monkeypatch):
    import importlib

    from rankcollapse.masks import check_mask

    capture_module = importlib.import_module("rankcollapse.hf.capture")
    calls = []

    def counted(m, n=None):
        calls.append(n)
        return check_mask(m, n)

    monkeypatch.setattr(capture_module, "check_mask", counted)
    frame = probe(
        tiny_bert,
        variants="san,transformer",
        mask="window:1",
        random_tokens=True,
        n_samples=4,
        n_tokens=8,
        batch_size=1,
        metrics=["mu_rel"],
    )
    assert calls == [8] and set(frame["mask"]) == {"window:1"} and frame["sample"].nunique() == 4


def test_the_three_parts_compose_to_the_same_rows_as_probe(tiny_bert):
    from rankcollapse.measure import ModelSource, ProbeInputs, resolve_probe, run_probe

    options = {"random_tokens": True, "n_samples": 2, "n_tokens": 8, "seed": 3}
    request = resolve_probe("san", "causal", ["mu_rel", "attn_entropy"], temperature=2.0)
    parts = run_probe(ModelSource(tiny_bert).load(), ProbeInputs(**options), request)
    whole = probe(
        tiny_bert,
        variants="san",
        mask="causal",
        metrics=["mu_rel", "attn_entropy"],
        temperature=2.0,
        **options,
    )
    pd.testing.assert_frame_equal(parts, whole)
