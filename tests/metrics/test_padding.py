"""Pads never enter: a padded sequence reads exactly as the same sequence without its pads."""

import pytest
import torch

from rankcollapse.metrics import METRICS, measure_attention, measure_states

STATE_METRICS = [name for name, info in METRICS.items() if info.kind == "states"]
ATTENTION_METRICS = [name for name, info in METRICS.items() if info.kind == "attention"]


def _padded_states(d: int):
    """(4, 9, d) states with pads at scattered positions holding garbage (huge values, NaN)."""
    g = torch.Generator().manual_seed(d)
    x = torch.randn(4, 9, d, generator=g, dtype=torch.float64)
    mask = torch.zeros(4, 9, dtype=torch.bool)
    for b, n_real in enumerate((9, 2, 5, 7)):
        mask[b, torch.randperm(9, generator=g)[:n_real]] = True
    x[~mask] = 1e6
    x[1][~mask[1]] = float("nan")
    return x, mask


@pytest.mark.parametrize("name", STATE_METRICS)
@pytest.mark.parametrize("d", [3, 12], ids=["d<n", "d>n"])
def test_padding_never_changes_a_state_metric(name, d):
    x, mask = _padded_states(d)
    padded = METRICS[name].fn(x, mask)
    for b in range(len(x)):
        alone = METRICS[name].fn(x[b][mask[b]])
        assert padded[b].item() == pytest.approx(alone.item(), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("d", [3, 12], ids=["d<n", "d>n"])
def test_padding_never_changes_the_suite(d):
    x, mask = _padded_states(d)
    padded = measure_states(x, mask)
    for b in range(len(x)):
        alone = measure_states(x[b][mask[b]])
        for name, result in alone.items():
            assert padded[name].value[b].item() == pytest.approx(result.value.item(), rel=1e-12)
            assert bool(padded[name].at_floor[b]) == bool(result.at_floor)


def _padded_attention():
    """(3, 6, 6) attention over 6, 3 and 4 real tokens; pad keys get 0, pad queries garbage."""
    g = torch.Generator().manual_seed(0)
    mask = torch.zeros(3, 6, dtype=torch.bool)
    for b, n_real in enumerate((6, 3, 4)):
        mask[b, torch.randperm(6, generator=g)[:n_real]] = True
    scores = torch.randn(3, 6, 6, generator=g, dtype=torch.float64)
    a = torch.softmax(scores.masked_fill(~mask[:, None, :], -torch.inf), -1)
    a[~mask] = float("nan")  # pad query rows
    return a, mask


@pytest.mark.parametrize("name", ATTENTION_METRICS)
@pytest.mark.parametrize("windowed", [False, True], ids=["all-pairs", "window"])
def test_padding_never_changes_an_attention_metric(name, windowed):
    a, mask = _padded_attention()
    index = torch.arange(6)
    edges = (index[:, None] - index[None, :]).abs() <= 1 if windowed else None
    # the window must keep a real key for every real query: self-loops guarantee it
    padded = METRICS[name].fn(a, mask, edges=edges)
    for b in range(len(a)):
        real = mask[b].nonzero().squeeze(-1)
        sub_edges = None if edges is None else edges[real][:, real]
        alone = METRICS[name].fn(a[b][real][:, real], edges=sub_edges)
        assert padded[b].item() == pytest.approx(alone.item(), rel=1e-12, abs=1e-15)
    suite = measure_attention(a, mask, edges=edges, metrics=[name])
    assert torch.equal(suite[name].value, padded)
