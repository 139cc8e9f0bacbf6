"""measure.layers: how many samples a pass holds, and layers measured in groups of one shape."""

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from rankcollapse.measure import layers
from rankcollapse.metrics import measure_states


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


@pytest.mark.parametrize("pads", [False, True])
def test_a_pass_without_pads_tells_the_suite_so(monkeypatch, pads):
    # the token mask is on the host: when it holds no pad the suite gets None, so the
    # accelerator's route skips the pass that would zero pad rows it cannot look for
    from rankcollapse.hf import LayerCapture

    token_mask = torch.ones(2, 6, dtype=torch.bool)
    if pads:
        token_mask[1, 4:] = False
    given = []

    def recorded(x, mask, **kwargs):
        given.append(mask)
        return measure_states(x, mask, **kwargs)

    monkeypatch.setattr(layers, "measure_states", recorded)
    on_layer = layers.LayerMeasure(["mu_rel"], (), {}, token_mask)
    on_layer(LayerCapture(0, torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(1))))
    on_layer.finish()
    assert (given[0] is None) is (not pads)
    if pads:
        assert torch.equal(given[0][0], token_mask)
