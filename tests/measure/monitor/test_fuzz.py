"""Property-based fuzzing of the monitor from Python: whatever `watch`, `step` and an existing
`CsvLog` are given, the answer is a measurement or one `RankCollapseError`, never another
exception; steps are logged once each, in order; a refused log is left byte for byte."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankcollapse.errors import InputError, RankCollapseError
from rankcollapse.measure.monitor import COLUMNS, CsvLog, MemoryLog, read_log, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens

NET = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on"))
OTHER = ToyNet(NetConfig(n_layers=2, d_model=8))
X = random_tokens(2, 4, 8, seed=0)
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))

STEPS = st.one_of(
    st.integers(-3, 30), st.booleans(), st.floats(allow_nan=True), st.text(max_size=2), st.none()
)


@FUZZ
@given(steps=st.lists(STEPS, max_size=10), every=st.integers(1, 4))
def test_step_logs_each_valid_step_once_in_order_and_refuses_the_rest(steps, every):
    log = MemoryLog()
    monitor = watch(NET, blocks="blocks", inputs=X, every=every, metrics="mu_rel", logs=[log])
    last, measured = None, []
    for step in steps:
        valid = type(step) is int and step >= 0 and (last is None or step > last)
        if not valid:
            with pytest.raises(InputError):
                monitor.step(step)
            continue
        rows = monitor.step(step)
        last = step
        assert (rows is None) == (step % every != 0)
        measured += [step] if rows is not None else []
    assert log.frame["step"].drop_duplicates().tolist() == measured


NAMES = st.sampled_from(["mu_rel", "mu", "stable_rank", "attn_entropy", "bogus", "", 1, None])
TENSORS = st.sampled_from(
    [
        X,
        X[:, :1],
        X[0],
        X.double(),
        X.long(),
        torch.zeros(0, 4, 8),
        torch.full_like(X, float("nan")),
        "tokens",
        None,
    ]
)
BLOCKS = st.sampled_from(
    [
        "blocks",
        "blockz",
        "blocks.0",
        "",
        [],
        [NET.blocks[1], NET.blocks[0]],
        list(OTHER.blocks),
        [NET.blocks[0], NET.blocks[0]],
        3,
        None,
    ]
)


@FUZZ
@given(
    metrics=st.one_of(st.none(), st.text(max_size=10), st.lists(NAMES, max_size=3), NAMES),
    variants=st.one_of(
        st.sampled_from(["transformer", "san", "", "transformer,transformer"]),
        st.lists(NAMES, max_size=2),
    ),
    every=st.one_of(st.integers(-1, 3), st.booleans(), st.floats(0, 3), st.text(max_size=1)),
    inputs=TENSORS,
    blocks=BLOCKS,
    logs=st.sampled_from([(), [], [MemoryLog()], MemoryLog(), ["log.csv"], "log.csv", [None], 7]),
)
def test_watch_either_measures_or_says_what_is_wrong(
    metrics, variants, every, inputs, blocks, logs
):
    try:
        monitor = watch(
            NET,
            metrics=metrics,
            variants=variants,
            every=every,
            inputs=inputs,
            blocks=blocks,
            logs=logs,
        )
    except RankCollapseError as err:
        assert str(err) and "\n" not in str(err).strip()
        return
    rows = monitor.step(0)
    assert list(rows.columns) == list(COLUMNS) and len(rows) and rows["value"].notna().all()


def _a_log() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "collapse.csv"
        monitor = watch(
            NET, blocks="blocks", inputs=X, every=1, metrics="mu_rel", logs=[CsvLog(path)]
        )
        for step in range(3):
            monitor.step(step)
        return path.read_bytes()


LOG = _a_log()
MUTATED = st.builds(
    lambda cut, at, byte, tail: LOG[:cut] + (bytes([byte]) + LOG[at:] if tail else b""),
    st.integers(0, len(LOG)),
    st.integers(0, len(LOG)),
    st.integers(0, 255),
    st.booleans(),
)


@FUZZ
@given(
    content=st.one_of(st.binary(max_size=120), st.text(max_size=120).map(str.encode), MUTATED),
    start=st.integers(0, 4),
)
def test_an_existing_log_is_continued_or_refused_untouched(content, start):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "collapse.csv"
        path.write_bytes(content)
        try:
            monitor = watch(
                NET, blocks="blocks", inputs=X, every=1, metrics="mu_rel", logs=[CsvLog(path)]
            )
            monitor.step(start)
        except RankCollapseError:
            assert path.read_bytes() == content
            return
        stored = read_log(path)
        steps = stored["step"].drop_duplicates().tolist()
        assert steps == sorted(steps) and steps[-1] == start
        assert (stored.groupby("step").size() == 3 * 2).all()  # whole steps only
