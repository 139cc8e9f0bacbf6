import pytest
import torch

from rankcollapse.errors import ConfigError, UnknownNameError
from rankcollapse.tasks import san_config, task_data, train_and_eval_data, trivial_baselines


def test_train_and_eval_data_split_one_stream_without_overlap():
    train, held_out = train_and_eval_data("sorting", 30, 10, seed=4, n_tokens=6)
    both = task_data("sorting", 40, seed=4, n_tokens=6)
    assert torch.equal(train.inputs, both.inputs[:30])
    assert torch.equal(held_out.inputs, both.inputs[30:])
    assert torch.equal(held_out.targets, held_out.inputs.sort(dim=1).values)


def test_memorization_is_scored_on_its_own_training_windows():
    train, held_out = train_and_eval_data("memorization", 6, 4, seed=0, n_tokens=8)
    assert torch.equal(held_out.inputs, train.inputs[:4])
    assert torch.equal(held_out.targets, train.targets[:4])
    with pytest.raises(ConfigError, match=r"n_eval \(7\) must be <= n_train \(6\)"):
        train_and_eval_data("memorization", 6, 7, seed=0, n_tokens=8)


def test_the_san_of_each_task_reads_its_inputs_and_sees_positions_only_for_sorting():
    sizes = {"n_layers": 2, "n_heads": 2, "d_model": 8, "seed": 0}
    sorting = san_config(task_data("sorting", 2, seed=0, n_tokens=5), **sizes)
    hull = san_config(task_data("convex-hull", 2, seed=0, n_tokens=6), **sizes)
    assert (sorting.inputs, sorting.vocab_size, sorting.n_positions) == ("tokens", 10, 5)
    assert (hull.inputs, hull.vocab_size, hull.n_positions, hull.n_classes) == (
        "points",
        None,
        0,
        2,
    )


def test_unknown_task_names_the_known_ones():
    with pytest.raises(UnknownNameError, match="unknown task 'sortin'.*Did you mean 'sorting'"):
        task_data("sortin", 4, seed=0, n_tokens=8)


def test_the_position_prior_scores_each_positions_majority_class():
    # position 0: classes 0, 0, 1 (majority 0: 2 of 3); position 1: 1, 1, 1 (3 of 3)
    targets = torch.tensor([[0, 1], [0, 1], [1, 1]])
    baselines = trivial_baselines(targets, 2)
    assert baselines["majority"] == pytest.approx(4 / 6)
    assert baselines["position_majority"] == pytest.approx(5 / 6)
    # sorted digits: position i holds about the i-th smallest, far above the global majority
    sorting = task_data("sorting", 2000, seed=0, n_tokens=8).baselines()
    assert sorting["position_majority"] > 2 * sorting["majority"]
