"""dong2021-rank-collapse: hand-made per-layer means of the quick preset's four arms."""

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

# SmolLM2-135M's san in the quick run: mean res_comp_rel per layer 0..13
SMOLLM2_SAN = [0.98, 0.35, 0.14, 0.24, 0.1, 0.081, 0.078, 0.06, 0.04, 0.041, 0.019, 0.023, 0.013,
               6.7e-3]  # fmt: skip


def table(changes: dict | None = None, drop: tuple = ()) -> pd.DataFrame:
    curves = {k: v for k, v in {**CURVES, **(changes or {})}.items() if k not in drop}
    rows = [
        (model, init, variant, layer, sample, "res_comp_rel", value, value < 1e-6, "no")
        for (model, init, variant), values in curves.items()
        for layer, value in enumerate(values)
        for sample in (0, 1)
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
    ),
    "init-skip-stays": Case(
        passing=table(),
        # BERT's skip decays by 0.3 per layer: well above 0 at layer 2, but not slowly
        failing=table({("bert-base", "random", "san+skip"): [0.6, 0.2, 0.06]}),
        untested=table(drop=(("minilm", "random", "transformer"),)),  # a member missing
    ),
    "pretrained-san-collapses": Case(
        # the audit's MiniLM: 0.998, 0.735, 0.384, 0.073, 1.1e-3, 2e-7: below 0.01 at layer 4
        passing=table({("minilm", "pretrained", "san"): [1.0, 0.735, 0.384, 0.073, 1.1e-3, 2e-7]}),
        # an encoder whose san is still at 0.06 at layer 5: below 0.01 only at layer 6
        failing=table({("minilm", "pretrained", "san"): [1.0, 0.7, 0.4, 0.2, 0.1, 0.06, 1e-3]}),
    ),
    "pretrained-decoder-san-collapses": Case(
        passing=table(),  # SmolLM2 below 0.01 at layer 3
        # SmolLM2 as measured (30 layers): 0.35, 0.14, ... 0.013 at layer 12, below 0.01 at 13
        failing=table({("smollm2", "pretrained", "san"): SMOLLM2_SAN}),
    ),
    "pretrained-transformer-keeps": Case(
        passing=table(),
        failing=table({("smollm2", "pretrained", "transformer"): [1.0, 0.3, 0.1, 0.01]}),
    ),
}
