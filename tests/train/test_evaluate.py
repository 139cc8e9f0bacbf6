import pandas as pd
import pytest
import torch
from torch.nn.functional import layer_norm

from rankcollapse.nets import SAN, SANConfig
from rankcollapse.paths import FULL, SKIP, restricted_logits
from rankcollapse.tasks import memorization_data, sorting_data
from rankcollapse.train import accuracy, evaluate_san, path_accuracies


def _sorting_model():
    config = SANConfig(inputs="tokens", vocab_size=10, n_classes=10, n_positions=8, n_layers=2,
                       d_model=8)  # fmt: skip
    return SAN(config).eval()


def test_accuracy_counts_matching_tokens_per_group():
    logits = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]]], [[[0.0, 1.0], [0.0, 1.0]]]])
    assert accuracy(logits, torch.tensor([[0, 1]])).tolist() == [1.0, 0.5]


def test_restricted_logits_with_every_layer_whole_equal_the_full_model():
    data = sorting_data(16, seed=1)
    model = _sorting_model()
    with torch.no_grad():
        whole = restricted_logits(model, data.inputs, torch.full((1, 1, 2), FULL))[0]
        assert torch.equal(whole, model(data.inputs))


def test_the_empty_path_sees_only_the_embedding():
    data = sorting_data(16, seed=1)
    model = _sorting_model()
    with torch.no_grad():
        skip_all = restricted_logits(model, data.inputs, torch.full((1, 1, 2), SKIP))[0]
        x0 = model.embed(data.inputs)  # the one route never goes through a head
        assert torch.allclose(skip_all, model.classify(layer_norm(x0, (8,))), atol=1e-6)


def test_path_accuracies_score_each_sample_as_its_own_restricted_model(monkeypatch):
    data = sorting_data(12, seed=2)
    model = _sorting_model()
    frame = path_accuracies(model, data.inputs, data.targets, n_paths=[3], n_repeats=2, seed=5)
    assert frame[["length", "repeat"]].values.tolist() == [[k, r] for k in range(3) for r in (0, 1)]
    # k = 0 keeps the embedding alone, whatever the sample: one value.
    zero = frame[frame["length"] == 0]["accuracy"]
    with torch.no_grad():
        alone = accuracy(restricted_logits(model, data.inputs, torch.full((1, 2), SKIP)),
                         data.targets)  # fmt: skip
    assert zero.tolist() == [float(alone)] * 2
    again = path_accuracies(model, data.inputs, data.targets, n_paths=[3], n_repeats=2, seed=5)
    pd.testing.assert_frame_equal(frame, again)
    # batching the route groups (a memory bound) never changes a value
    monkeypatch.setattr("rankcollapse.train.evaluate.MAX_ROUTE_SEQUENCES", 1)
    one_by_one = path_accuracies(model, data.inputs, data.targets, n_paths=[3], n_repeats=2, seed=5)
    pd.testing.assert_frame_equal(frame, one_by_one)


def test_evaluate_san_reports_full_accuracy_then_baselines_then_paths():
    data = sorting_data(20, seed=3)
    model = _sorting_model()
    rows = evaluate_san(model, data, n_paths=[2], n_repeats=2, seed=0)
    assert rows.iloc[0][["kind", "metric"]].tolist() == ["full", "accuracy"]
    with torch.no_grad():
        assert rows.iloc[0]["value"] == float(accuracy(model(data.inputs), data.targets))
    baselines = rows[rows["kind"] == "baseline"].set_index("metric")["value"]
    assert set(baselines.index) == {"random", "majority", "position_majority"}
    assert (rows[rows["kind"] == "paths"]["length"] == [0, 0, 1, 1, 2, 2]).all()


@pytest.mark.slow
def test_models_without_positions_get_no_position_prior_and_memorization_its_ceiling():
    data = memorization_data(4, seed=0, n_tokens=8)
    model = SAN(SANConfig(inputs="tokens", vocab_size=data.vocab_size, n_classes=2, n_layers=1,
                          d_model=4)).eval()  # fmt: skip
    rows = evaluate_san(model, data, n_paths=[1], n_repeats=2, seed=0)
    assert set(rows[rows["kind"] == "baseline"]["metric"]) == {"random", "majority", "ceiling"}
