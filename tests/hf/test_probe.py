"""probe(): tidy frame, pads never enter a metric, and every bad input fails early and clearly."""

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError, InputError, UnknownNameError
from rankcollapse.hf import RunSettings, load_model, load_windows, run_batch, wrap_model
from rankcollapse.masks import causal, complete
from rankcollapse.measure import layers, probe
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


def test_unknown_model_error_lists_known_models():
    with pytest.raises(
        UnknownNameError,
        match="unknown model 'minilm6'. Known: minilm, smollm2, bert-base.*local model directory.*Did you mean 'minilm'",
    ):
        load_model("minilm6")


def test_random_preset_has_no_pretrained_weights():
    with pytest.raises(ConfigError, match="'bert-base' is a random-init preset.*init='random'"):
        load_model("bert-base")


def test_unsupported_architecture_names_the_supported_ones():
    from transformers import MPNetConfig, MPNetModel

    model = MPNetModel(
        MPNetConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=50,
        )
    )
    with pytest.raises(
        UnknownNameError,
        match="unsupported architecture 'mpnet'. Supported model types: llama, mistral, .*, vit",
    ):
        wrap_model(model, name="mpnet")


def test_variant_not_defined_for_a_model_whose_blocks_lack_the_part(make_tiny, ids):
    loaded = make_tiny("bert")
    for layer in loaded.model.encoder.layer:
        layer.attention.output.dropout = None  # a BERT-like model laid out differently
    with pytest.raises(
        ConfigError,
        match="variant 'san' is not defined for this bert model.*attention.output.dropout",
    ):
        run_batch(loaded, ids, on_layer=lambda c: None, settings=RunSettings("san"))
    assert not any(m._forward_hooks for m in loaded.model.modules())


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


SMALL = {
    "num_hidden_layers": 1,
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}


def test_random_init_is_seeded_in_eval_mode_and_in_the_asked_dtype():
    a = load_model("bert-base", init="random", seed=3, dtype=torch.float64, config_overrides=SMALL)
    b = load_model("bert-base", init="random", seed=3, dtype=torch.float64, config_overrides=SMALL)
    c = load_model("bert-base", init="random", seed=4, dtype=torch.float64, config_overrides=SMALL)
    wa, wb, wc = (m.model.encoder.layer[0].attention.self.query.weight for m in (a, b, c))
    assert wa.dtype == torch.float64 and not a.model.training
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    assert a.info["init"] == "random (library default, seed 3)"


def test_config_overrides_need_a_random_init():
    with pytest.raises(ConfigError, match="config_overrides .* need init='random'"):
        load_model("minilm", config_overrides={"num_hidden_layers": 2})


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


def test_resolve_probe_parses_names_once_into_typed_values():
    from rankcollapse.hf import VARIANTS
    from rankcollapse.masks import MaskSpec
    from rankcollapse.measure import resolve_probe

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


@pytest.mark.parametrize(
    ("device", "batch_size", "train_mode", "expected"),
    [
        ("cpu", None, False, layers.MAX_TOKENS // 128),
        ("cuda", None, False, layers.DEVICE_MAX_TOKENS // 128),  # larger passes on a device
        ("cpu", 3, False, 3),  # the request's batch size wins
        ("cpu", None, True, 40),  # train mode: one pass, so dropout is drawn once
    ],
)
def test_samples_per_pass_hold_the_device_token_budget(device, batch_size, train_mode, expected):
    request = SimpleNamespace(batch_size=batch_size, train_mode=train_mode)
    assert layers.samples_per_pass(request, 40, 128, torch.device(device)) == expected


@pytest.mark.parametrize(
    ("sequences", "values", "calls"),
    [
        (6, 10_000, [(3, 2), (2, 2), (2, 2)]),  # three layers of two samples a group
        (6, 2 * 6 * 8 * 2, [(2, 2), (2, 2), (1, 2), (2, 2)]),  # the values cap two wide layers
        (1, 10_000, [(1, 2)] * 7),  # one sample asked for: a layer at a time
    ],
)
def test_layers_are_measured_in_groups_of_one_shape_from_copies_of_their_states(
    monkeypatch, sequences, values, calls
):
    # a full group is measured in one call, a new shape measures the group first, finish()
    # the rest; the states are copied, so a model that later changes its tensor in place
    # changes no value; every value equals the suite's on that layer alone
    from rankcollapse.hf import LayerCapture

    generator = torch.Generator().manual_seed(0)
    shapes = [(2, 6, 8)] * 5 + [(2, 6, 4)] * 2  # the last two layers are narrower
    states = [torch.randn(shape, generator=generator) for shape in shapes]
    token_mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    made = []

    def counted(x, *args, **kwargs):
        made.append(tuple(x.shape[:-2]))
        return measure_states(x, *args, **kwargs)

    monkeypatch.setattr(layers, "GROUP_SEQUENCES", sequences)
    monkeypatch.setattr(layers, "GROUP_VALUES", values)
    monkeypatch.setattr(layers, "measure_states", counted)
    on_layer = layers.LayerMeasure(["mu_rel", "stable_rank"], (), {"step": 0}, token_mask)
    for layer, x in enumerate(states):
        given = x.clone()
        on_layer(LayerCapture(layer, given))
        given.fill_(float("nan"))  # the model reuses its tensor
    on_layer.finish()
    assert made == calls and on_layer.group is None
    frame = pd.concat(layers.LayerMeasure.frames_of([on_layer]), ignore_index=True)
    for layer, x in enumerate(states):
        for name, result in measure_states(
            x, token_mask, metrics=["mu_rel", "stable_rank"]
        ).items():
            got = frame[(frame["layer"] == layer) & (frame["metric"] == name)]
            assert torch.equal(torch.tensor(got["value"].to_numpy()), result.value), (layer, name)


def test_frames_of_a_pass_whose_last_group_was_never_measured_is_an_error():
    from rankcollapse.hf import LayerCapture

    on_layer = layers.LayerMeasure(["mu_rel"], (), {}, None)
    on_layer(LayerCapture(0, torch.ones(2, 3, 4)))  # waits for more layers
    with pytest.raises(RuntimeError, match=r"finish\(\) was not called"):
        layers.LayerMeasure.frames_of([on_layer])
