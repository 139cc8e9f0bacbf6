import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.tasks import TaskData, label_ceiling, memorization_data
from rankcollapse.tasks.memorization import minilm_tokenizer

TEXT = " ".join(f"Sentence number {i} says something plain about the weather." for i in range(60))


def test_memorization_windows_are_real_tokens_with_random_binary_labels():
    data = memorization_data(20, seed=0, n_tokens=8, text=TEXT)
    assert data.inputs.shape == data.targets.shape == (20, 8)
    assert set(data.targets.unique().tolist()) == {0, 1}
    # Compacted ids map back to real MiniLM tokens of the text.
    vocabulary = sorted(set(minilm_tokenizer()(TEXT, add_special_tokens=False)["input_ids"]))
    assert data.vocab_size <= len(vocabulary)
    assert int(data.inputs.max()) == data.vocab_size - 1
    assert data.baselines()["majority"] >= 0.5


def test_memorization_is_deterministic_by_seed():
    a, b = (memorization_data(10, seed=3, n_tokens=8, text=TEXT) for _ in range(2))
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.targets, b.targets)
    c = memorization_data(10, seed=4, n_tokens=8, text=TEXT)
    assert not torch.equal(a.targets, c.targets)


def test_label_ceiling_counts_each_group_of_equal_tokens_at_its_majority_label():
    inputs = torch.tensor([[0, 0, 0, 1], [2, 2, 1, 1]])
    targets = torch.tensor([[0, 1, 1, 0], [1, 0, 1, 1]])
    # window 1: tokens 0 -> labels (0, 1, 1): 2 of 3; token 1: 1 of 1; window 2: 1 + 2.
    assert label_ceiling(TaskData("m", inputs, targets, 2, 3)) == pytest.approx(6 / 8)


def test_bad_memorization_sizes_are_rejected():
    with pytest.raises(ConfigError, match="n_tokens >= 2"):
        memorization_data(4, seed=0, n_tokens=1, text=TEXT)
