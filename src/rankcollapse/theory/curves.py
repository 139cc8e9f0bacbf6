"""mu curves per layer of the toy network under a mask (Wu et al. 2024, Sec. 4), and what the
Wu experiments read from curves.

Wu et al. plot mu(X^l) = ||X^l - 1 gamma^T||_F against layer l for pure SAN, SAN+skip, SAN+LN,
SAN+skip+LN and the full transformer under several masks. `toy_curves` produces those curves of
the toy network with Wu's dynamics (`rankcollapse.nets` variants `wu:*`: unit-sphere LayerNorm
after the skip sum), one batched float64 pass per variant, as tidy rows (..., variant, mask,
mode, layer, sample, metric, value, at_floor); a real model's are `rankcollapse.hf.real_curves`.
`curve_slopes` and `early_drop` read curves of either.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch

from rankcollapse.masks import MaskSpec
from rankcollapse.metrics import measure_layers
from rankcollapse.nets import ToyNet, random_tokens, toy_config
from rankcollapse.seeds import stream_seed
from rankcollapse.theory.rates import collapse_rates
from rankcollapse.variants import Variant

CPU = torch.device("cpu")

CURVE_METRICS = ("mu", "mu_rel")


def toy_curves(
    variants: Sequence[Variant],
    mask: MaskSpec,
    *,
    n_layers: int,
    d_model: int,
    n_tokens: int,
    n_samples: int,
    seed: int,
    temperature: float | None = None,
    metrics: Sequence[str] = CURVE_METRICS,
    device: torch.device = CPU,
) -> pd.DataFrame:
    """Per-layer metrics of the toy network with Wu's dynamics, for each of Wu et al.'s variants
    (`rankcollapse.variants.WU_VARIANTS`, named in the rows within their set: "san+ln").

    Weights come from `seed`, the Gaussian tokens from its data stream (`stream_seed`), so
    the same tokens enter every variant and mask. `temperature` is the d_QK of the softmax
    scale 1/sqrt(d_QK) (None: the head's d_qk).

    Example:
        >>> from rankcollapse.masks import parse_mask_spec
        >>> from rankcollapse.variants import VARIANTS
        >>> causal = parse_mask_spec("causal")
        >>> frame = toy_curves([VARIANTS["wu:san"]], causal, n_layers=2, d_model=4, n_tokens=3,
        ...                    n_samples=1, seed=0)
        >>> sorted(frame["layer"].unique().tolist()), sorted(frame["metric"].unique())
        ([0, 1, 2], ['mu', 'mu_rel'])
    """
    x = random_tokens(n_samples, n_tokens, d_model, seed=stream_seed(seed, "data")).to(device)
    frames = []
    for variant in variants:
        net = ToyNet(
            toy_config(
                variant,
                n_layers=n_layers,
                d_model=d_model,
                mask=mask,
                temperature=temperature,
                seed=seed,
            )
        ).to(device)
        with torch.no_grad():
            states = net(x).states
        frames.append(
            measure_layers(
                states, metrics=list(metrics), source_dtype=net.dtype, variant=variant.short
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    return frame.assign(model="toy", init="random", mask=str(mask), mode="eval")


def curve_slopes(results: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """The collapse slope (`collapse_rate`) of every curve of mu and mu_rel, one row per group
    of `by`: slope_mu, slope_mu_rel, fit_layers_mu, fit_layers_mu_rel and `diverged` (a
    `diverged` row in the group: its slopes are NaN).

    Example:
        >>> rows = pd.DataFrame({"v": "a", "layer": [0, 1], "sample": 0, "at_floor": False,
        ...                      "metric": "mu", "value": [1.0, 0.25]})
        >>> curve_slopes(rows, ["v"])[["v", "slope_mu", "diverged"]].round(4).values.tolist()
        [['a', -1.3863, False]]
    """
    table = results[by].drop_duplicates().reset_index(drop=True)
    for metric in ("mu", "mu_rel"):
        rates = collapse_rates(results[results["metric"] == metric], by)
        rates = rates.rename(columns={"slope": f"slope_{metric}", "n_fit": f"fit_layers_{metric}"})
        table = table.merge(rates, on=by, how="left")
    diverged = results.loc[results["metric"] == "diverged", by].drop_duplicates()
    table = table.merge(diverged.assign(diverged=True), on=by, how="left")
    table["diverged"] = table["diverged"].eq(True)
    return table


def early_drop(curve: pd.DataFrame, early_layers: int, floor: float) -> float:
    """log mu_rel(0) - log mu_rel(early_layers) of the mean log over samples, floor-clipped:
    the early collapse of a curve (Wu et al. 2024, temperature experiment). A curve that
    reaches the dtype floor early has a finite drop.

    Example:
        >>> curve = pd.DataFrame({"layer": [0, 1, 2], "value": [1.0, 0.1, 1e-30]})
        >>> round(early_drop(curve, 2, 1e-15), 4)  # 15 ln 10: the floor caps the drop
        34.5388
    """
    logs = np.log(curve["value"].clip(lower=floor)).groupby(curve["layer"]).mean()
    last = min(early_layers, int(logs.index.max()))
    return float(logs.loc[0] - logs.loc[last])
