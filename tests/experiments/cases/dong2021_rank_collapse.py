"""dong2021-rank-collapse: hand-made per-layer values of the quick preset's four arms, two
windows each (the units of every finding): one curve for both, or a pair, one per window."""

import pandas as pd
from _case import Case

# (model, init, variant) -> mean res_comp_rel per layer (two identical windows each).
CURVES = {
    ("minilm", "pretrained", "san"): [1.0, 0.7, 0.4, 0.006, 3e-4, 2e-7, 1e-7],  # layer 3 of 6
    ("minilm", "pretrained", "transformer"): [1.0, 0.9, 0.9, 0.8, 0.8, 0.6, 0.9],
    ("smollm2", "pretrained", "san"): [1.0, 0.35, 0.14, 0.006],  # layer 3 of 3
    ("smollm2", "pretrained", "transformer"): [1.0, 0.8, 0.7, 0.5],
    ("minilm", "random", "san"): [0.6, 0.01, 1e-7],
    ("minilm", "random", "san+mlp"): [0.6, 0.01, 1e-7],
    ("minilm", "random", "san+skip"): [0.6, 0.6, 0.6],
    ("minilm", "random", "transformer"): [0.6, 0.6, 0.6],
    ("bert-base", "random", "san"): [0.6, 0.02, 2e-6],
    ("bert-base", "random", "san+mlp"): [0.6, 0.02, 2e-6],
    ("bert-base", "random", "san+skip"): [0.6, 0.5, 0.4],
    ("bert-base", "random", "transformer"): [0.6, 0.5, 0.4],
}

# SmolLM2-135M's san in the quick run: mean res_comp_rel per layer 0..30 (below 0.01 at 13)
SMOLLM2_SAN = [0.98, 0.35, 0.14, 0.24, 0.1, 0.081, 0.078, 0.06, 0.04, 0.041, 0.019, 0.023, 0.013,
               6.7e-3, 2.5e-3, 1.5e-3, 7.4e-4, 4.5e-4, 1.7e-4, 1e-4, 2.8e-5, 9.7e-6, 5e-6,
               2.7e-6, 1.4e-6, 8e-7, 5e-7, 4.8e-7, 3.8e-7, 4.1e-7, 4.6e-7]  # fmt: skip


def falling(first: int, depth: int = 30) -> list[float]:
    """A curve of `depth` layers that first falls below 0.01 at layer `first`."""
    return [0.5 if layer < first else 1e-3 for layer in range(depth + 1)]


def table(changes: dict | None = None, drop: tuple = ()) -> pd.DataFrame:
    curves = {k: v for k, v in {**CURVES, **(changes or {})}.items() if k not in drop}
    windows = {k: v if isinstance(v, tuple) else (v, v) for k, v in curves.items()}
    rows = [
        (model, init, variant, layer, sample, "res_comp_rel", value, value < 1e-6, "no")
        for (model, init, variant), pair in windows.items()
        for sample, values in enumerate(pair)
        for layer, value in enumerate(values)
    ]
    columns = [
        "model",
        "init",
        "variant",
        "layer",
        "sample",
        "metric",
        "value",
        "at_floor",
        "quantized",
    ]
    return pd.DataFrame(rows, columns=columns)


CASES = {
    "init-san-collapses": Case(
        passing=table(),
        failing=table({("bert-base", "random", "san+mlp"): [0.6, 0.3, 0.1]}),
        # one window at 0.001, the other at 0.03 by layer 2: two windows straddle 0.01
        untested=table({("bert-base", "random", "san+mlp"): ([0.6, 0.1, 1e-3], [0.6, 0.2, 0.03])}),
    ),
    "init-skip-stays": Case(
        passing=table(),
        # BERT's skip decays by 0.3 per layer: well above 0 at layer 2, but not slowly
        failing=table({("bert-base", "random", "san+skip"): [0.6, 0.2, 0.06]}),
        untested=table({("bert-base", "random", "san+skip"): ([0.6, 0.5, 0.4], [0.6, 0.2, 0.18])}),
    ),
    "pretrained-san-collapses": Case(
        # the audit's MiniLM: 0.998, 0.735, 0.384, 0.073, 1.1e-3, 2e-7: below 0.01 at layer 4
        passing=table({("minilm", "pretrained", "san"): [1.0, 0.735, 0.384, 0.073, 1.1e-3, 2e-7]}),
        # an encoder whose san is still at 0.06 at layer 5: below 0.01 only at layer 6
        failing=table({("minilm", "pretrained", "san"): [1.0, 0.7, 0.4, 0.2, 0.1, 0.06, 1e-3]}),
        # one window below 0.01 at layer 3, the other only at layer 6
        untested=table({("minilm", "pretrained", "san"): (falling(3, 6), falling(6, 6))}),
    ),
    "pretrained-decoder-san-collapses": Case(
        # a 30-layer decoder (a handful is 12.5 layers): both windows below 0.01 at layer 10
        passing=table({("smollm2", "pretrained", "san"): (falling(10), falling(10))}),
        # a decoder whose san stays at 0.5 for 20 of its 30 layers
        failing=table({("smollm2", "pretrained", "san"): falling(20)}),
        # two windows: below 0.01 at layers 8 and 16
        untested=table({("smollm2", "pretrained", "san"): (falling(8), falling(16))}),
    ),
    "pretrained-transformer-keeps": Case(
        passing=table(),
        failing=table({("smollm2", "pretrained", "transformer"): [1.0, 0.3, 0.1, 0.01]}),
        untested=table(
            {
                ("smollm2", "pretrained", "transformer"): (
                    [1.0, 0.8, 0.7, 0.5],
                    [1.0, 0.3, 0.1, 0.01],
                )
            }
        ),
    ),
}
