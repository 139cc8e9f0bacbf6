"""Progress on long steps: the probe calls its `progress` callback once per layer group and
once per forward pass, and the CLI's bar turns those calls into passes done and time left."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel

from rankcollapse.cli._console import PassProgress
from rankcollapse.measure import ModelSource, ProbeInputs, layers, resolve_probe, run_probe


def tiny_bert() -> BertModel:
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, vocab_size=50)  # fmt: skip
    return BertModel(cfg).eval()


@pytest.mark.parametrize("group_sequences", [2, 24])
def test_progress_is_called_once_per_layer_group_and_once_per_forward_pass(
    group_sequences, monkeypatch
):
    """4 samples, 2 per pass, 2 variants: 4 passes of 3 states (embedding and 2 blocks); with
    groups of 2 sequences each layer is its own group, with 24 the 3 layers are one group."""
    monkeypatch.setattr(layers, "GROUP_SEQUENCES", group_sequences)
    calls = []
    request = resolve_probe("transformer,san", None, ["res_comp_rel"], batch_size=2)
    inputs = ProbeInputs(random_tokens=True, n_samples=4, n_tokens=8, seed=0)
    loaded = ModelSource(tiny_bert(), "pretrained", 0, torch.device("cpu"), torch.float32).load()
    frame = run_probe(loaded, inputs, request, lambda *args: calls.append(args))
    groups = [1, 2, 3] if group_sequences == 2 else [3]
    expected = [c for k in range(4) for c in [*((k, 4, g) for g in groups), (k + 1, 4, 0)]]
    assert calls == expected
    assert len(frame) == 2 * 3 * 4  # variants x layers x samples, one metric


def test_the_bar_counts_passes_and_the_share_of_a_pass_its_layer_groups_measured():
    bar = PassProgress("[1/1] tiny")
    for call in [(0, 2, 2), (0, 2, 4), (1, 2, 0), (1, 2, 1)]:
        bar(*call)
    task = bar.bar.tasks[0]
    assert (task.total, task.completed, bar.per_pass) == (2, 1.25, 4)
    assert task.description == "[1/1] tiny: pass 2 of 2, 1 layers measured"
    bar(2, 2, 0)
    assert (task.completed, task.description) == (2, "[1/1] tiny: 2 of 2 forward passes done")


def test_without_a_terminal_each_pass_and_unit_done_is_a_line_with_the_time_left(
    monkeypatch, capsys
):
    """A log file gets a line per step done (a live bar would show only at its end): the
    pace of the steps done in this process, those done before it started not counted."""
    from rankcollapse.cli import _console
    from rankcollapse.cli.run import _progress_bar

    clock = iter([0.0, 60.0, 60.0, 180.0, 0.0, 100.0, 250.0])
    monkeypatch.setattr(_console.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(_console.err_console, "_force_terminal", False)
    bar = PassProgress("tiny")  # the clock starts at 0
    bar(0, 4, 3)  # inside a pass: no line
    bar(1, 4, 0)
    bar(1, 4, 0)  # the same count again: no second line
    bar(2, 4, 0)
    with _progress_bar(_console.err_console) as units:
        units("toy", 2, 6)  # 2 stored before: the clock starts at 0
        units("toy", 3, 6)
        units("toy", 6, 6)  # the last: nothing left to say
    err = capsys.readouterr().err.splitlines()
    lines = [line for line in err if "done," in line]
    assert lines == [
        "tiny: 1 of 4 forward passes done, 60 s elapsed, about 3.0 min left",
        "tiny: 2 of 4 forward passes done, 3.0 min elapsed, about 3.0 min left",
        "toy: 3 of 6 units done, 100 s elapsed, about 5.0 min left",
        "toy: 6 of 6 units done, 4.2 min elapsed",
    ]
