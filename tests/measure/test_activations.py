"""measure.activations: the file `rankcollapse measure` reads, written by `save_activations`
and measured from Python by `measure_file`."""

from __future__ import annotations

import struct

import pytest
import torch
from safetensors import safe_open

from rankcollapse.errors import RankCollapseError


def test_save_activations_round_trips_states_and_mask_through_measure_file(tmp_path):
    from rankcollapse.measure import measure_file, save_activations
    from rankcollapse.metrics import measure_layers

    g = torch.Generator().manual_seed(0)
    layers = [torch.randn(3, 6, 5, generator=g, dtype=torch.float64) for _ in range(4)]
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 4:] = False
    path = save_activations(tmp_path / "acts.safetensors", layers, mask)
    with safe_open(path, framework="pt") as f:
        assert torch.equal(f.get_tensor("states"), torch.stack(layers))
        assert torch.equal(f.get_tensor("mask"), mask)
    frame = measure_file(path, metrics=["mu_rel", "res_comp_rel"])
    expected = measure_layers(layers, mask, metrics=["mu_rel", "res_comp_rel"])
    assert frame["value"].tolist() == expected["value"].tolist()
    # one metric by its name alone, as probe and plot.layers take it (it was read letter by
    # letter: "unknown metric 'm'")
    alone = measure_file(path, metrics="mu_rel")
    assert (
        alone["value"].tolist() == measure_layers(layers, mask, metrics="mu_rel")["value"].tolist()
    )
    assert alone["value"].tolist() == expected[expected["metric"] == "mu_rel"]["value"].tolist()


@pytest.mark.parametrize(
    "states, mask, match",
    [
        ([], None, "non-empty sequence"),
        ([torch.zeros(2, 3, 4), torch.zeros(2, 4, 4)], None, "different shapes"),
        (torch.zeros(2, 3, 4, dtype=torch.int64), None, "dtype torch.int64"),
        (torch.zeros(2, 3, 4, 5), torch.ones(3, 5), r"mask has shape \(3, 5\).*\(3, 4\)"),
    ],
)
def test_save_activations_refuses_what_measure_could_not_read(tmp_path, states, mask, match):
    from rankcollapse.measure import save_activations

    with pytest.raises(RankCollapseError, match=match):
        save_activations(tmp_path / "acts.safetensors", states, mask)
    assert not list(tmp_path.iterdir())
    with pytest.raises(RankCollapseError, match="NAME.safetensors, not 'acts.pt'"):
        save_activations(tmp_path / "acts.pt", torch.zeros(2, 3, 4))


def test_measure_file_checks_metrics_device_and_header_before_reading(tmp_path):
    from rankcollapse.measure import measure_file, save_activations

    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(RankCollapseError, match="bad.safetensors' is not a readable safetensors"):
        measure_file(tmp_path / "bad.safetensors")
    with pytest.raises(RankCollapseError, match="mu_rell"):
        measure_file(tmp_path / "bad.safetensors", metrics=["mu_rell"])
    with pytest.raises(RankCollapseError, match="no file at"):
        measure_file(tmp_path / "missing.npy")
    states = save_activations(tmp_path / "acts.safetensors", [torch.zeros(2, 3, 4)])
    with pytest.raises(RankCollapseError, match="^the mask file: no file at '.*missing.npy'"):
        measure_file(states, mask=tmp_path / "missing.npy")  # said as if of the states, before


@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")
@pytest.mark.parametrize("kind", ["hooked", "bridge"])
def test_a_file_of_a_transformerlens_cache_gives_the_probe_s_numbers(kind, tmp_path):
    """The README's recipe: blocks.0.hook_resid_pre and every hook_resid_post of a
    run_with_cache, saved, then measured, equal the probe of the same model and ids: a
    HookedTransformer (TransformerLens 3; skipped on 4) and a TransformerBridge (3.9 and 4)."""
    from lens_models import bridge, hooked_transformer

    from rankcollapse.measure import ProbeInputs, measure_file, probe, save_activations

    model = hooked_transformer() if kind == "hooked" else bridge("native")
    metrics = ["res_comp_rel", "mu_rel", "stable_rank"]
    probed = probe(model, random_tokens=True, n_samples=3, n_tokens=8, metrics=metrics)
    ids, mask = ProbeInputs(random_tokens=True, n_samples=3, n_tokens=8).build(model)
    _, cache = model.run_with_cache(ids)
    states = [cache["blocks.0.hook_resid_pre"]]
    states += [cache[f"blocks.{l}.hook_resid_post"] for l in range(model.cfg.n_layers)]
    measured = measure_file(save_activations(tmp_path / "acts.safetensors", states, mask),
                            metrics=metrics)  # fmt: skip
    key = ["layer", "sample", "metric"]
    a = probed.sort_values(key)[[*key, "value"]].reset_index(drop=True)
    b = measured.sort_values(key)[[*key, "value"]].reset_index(drop=True)
    assert a[key].equals(b[key])
    assert (a["value"] - b["value"]).abs().max() <= 1e-12


def test_measure_layers_refuses_no_layer_and_names_the_layer_a_bad_state_is_in(tmp_path):
    from rankcollapse.errors import InputError, NonFiniteError
    from rankcollapse.measure import measure_file, save_activations
    from rankcollapse.metrics import measure_layers

    for empty in ([], torch.empty(0, 2, 4, 8)):  # a list or a stack of no layer
        with pytest.raises(InputError, match="states holds no layer; pass the state after"):
            measure_layers(empty)
    layers = [torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(k)) for k in range(4)]
    layers[2][0, 1, 3] = float("nan")
    save_activations(tmp_path / "acts.safetensors", layers)
    with pytest.raises(NonFiniteError, match=r"^layer 2 of the states: x has 1 NaN value\(s\)"):
        measure_file(tmp_path / "acts.safetensors")  # the class kept: callers tell NaN apart
    # a state of the wrong kind is said as measure_states says it, not through the floor's dtype
    with pytest.raises(InputError, match=r"^layer 1 of the states: x has dtype torch.int64; "):
        measure_layers([layers[0], torch.ones(2, 4, 8, dtype=torch.long)])
    with pytest.raises(InputError, match=r"^layer 0 of the states: x must be a torch.Tensor"):
        measure_layers([[[1.0, 2.0], [3.0, 4.0]]])
