"""Finite states of any magnitude are measured: huge or tiny values never fail and relative
metrics do not depend on the scale; absolute ones scale with it."""

import pytest
import torch

from rankcollapse.metrics import METRICS, measure_states

STATE_METRICS = [name for name, info in METRICS.items() if info.kind == "states"]
ABSOLUTE = {"res_comp", "mu", "min_sv"}  # in the units of x

SCALES = [1e300, 1e-300, 1.7e305, 1e-310, 2.0**100, 2.0**-101]


def _states(seed: int = 0, shape=(3, 7, 5)) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("scale", SCALES, ids=lambda s: f"{s:.0e}")
@pytest.mark.parametrize("shape", [(3, 7, 5), (3, 5, 7)], ids=["n>d", "n<d"])
def test_huge_and_tiny_states_read_as_the_same_states_at_scale_one(scale, shape):
    x = _states(1, shape)
    at_one = measure_states(x)
    scaled = measure_states(x * scale)
    for name in STATE_METRICS:
        expected = at_one[name].value * (scale if name in ABSOLUTE else 1.0)
        # 1e-310 is subnormal: x * 1e-310 itself keeps only about 11 digits
        rel = 1e-9 if scale < 1e-307 else 1e-12
        assert torch.allclose(scaled[name].value, expected, rtol=rel, atol=0), name
        info = torch.finfo(torch.float64)
        if scale < info.tiny / info.eps and METRICS[name].vanishes:
            assert bool(scaled[name].at_floor.all()), name  # underflow decides (1e-300, 1e-310)
        else:
            assert torch.equal(scaled[name].at_floor, at_one[name].at_floor), name


@pytest.mark.parametrize("name", STATE_METRICS)
def test_each_metric_function_takes_huge_values(name):
    x = _states(2)
    assert torch.isfinite(METRICS[name].fn(1e300 * x)).all()


def test_a_batch_mixing_huge_tiny_and_ordinary_sequences_reads_each_alone():
    x = _states(3)
    mixed = torch.stack([1e300 * x[0], 1e-300 * x[1], x[2]])
    batch = measure_states(mixed)
    for b in range(3):
        alone = measure_states(mixed[b])
        for name in STATE_METRICS:
            assert batch[name].value[b].item() == pytest.approx(alone[name].value.item(), rel=1e-12)


def test_huge_padded_states_keep_pads_out():
    x = _states(4, (2, 6, 5))
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[0, 4:] = False
    padded = measure_states(1e300 * x, mask)
    alone = measure_states(1e300 * x[0, :4])
    for name in STATE_METRICS:
        assert padded[name].value[0].item() == pytest.approx(alone[name].value.item(), rel=1e-12)
