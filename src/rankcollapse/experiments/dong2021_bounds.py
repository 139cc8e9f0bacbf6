"""dong2021-bounds: measured residuals of toy networks against Dong et al.'s bounds.

Paper: Dong, Cordonnier, Loukas 2021 (arXiv 2103.03404), Thm 2.2, Cor 2.3, 3.1, 3.2. With
r_l = ||res(X^l)||_{1,inf}: a pure SAN obeys r_l <= c r_{l-1}^3 with c = 4 gamma beta /
sqrt(d_qk) (times H for H heads, times lambda with an MLP after each layer); unrolled,
r_L <= c^{(3^L - 1)/2} r_0^{3^L}, i.e. sqrt(c) r_L <= (sqrt(c) r_0)^{3^L}: informative while the
level sqrt(c) r_0 < 1. With skips no such bound exists (Cor 3.1).

Variants (random init, `rankcollapse.nets.ToyNet`, float64; `rankcollapse.theory` constants):
    san-1head   pure single-head SAN                (Thm 2.2)
    san         pure SAN with n_heads heads         (Cor 2.3)
    san+mlp     + MLP after each layer, no skip     (Cor 3.2)
    san+skip    + attention skip: the pure-SAN bound of the same weights, which it escapes
Inputs: X = 1 x^T + s Z (x, Z Gaussian), s chosen per sequence so that sqrt(c) r_0 equals each
of `levels` (< 1: the bound is informative from the input on). Small widths keep the bound
testable beyond layer 1: it is loose by a few decades per layer (more at larger widths), and
the measured residual falls doubly exponentially, so it reaches the float64 floor within two
or three layers whatever the input.

san+skip also runs on inputs at `skip_levels` (> 1, where the bound says nothing), beside the
pure SAN of the same weights on the same inputs: there pure attention loses many decades, so
the skip has something to stop (at the informative levels sqrt(c) r_0 < 1 attention changes the
residual by O(c r^3) only, and any network keeps it).

gamma: the paper's softmax constant (its appendix) is not reproduced; gamma = 1 (config). The
bound grows with gamma, so one that holds with gamma = 1 holds for every gamma >= 1; it is
not shown that the paper's gamma is >= 1, so bound-holds is reported as a check of the code's
bound, not as evidence for the theorem.

Check:
- bound-holds: at every layer 1..L where a sequence is above the float64 floor, the per-layer
  bound c_l r_{l-1}^3 and the unrolled bound are >= the measured r_l (smallest margin >= 0
  decades); layers 1..min_tested_layer must each be tested, or it fails.

Findings, each decided by the one rule (`rankcollapse.experiments.verdicts`):
- cubic-contraction ("without skip connections or multi-layer perceptrons (MLPs), the output
  converges doubly exponentially to a rank-1 matrix", abstract; Thm 2.2's r_l <= c r_{l-1}^3):
  per seed, the median of log rho_l / log rho_{l-1} of the relative residual rho (layers with
  rho_{l-1} < 0.1, both above the float64 floor) is within 0.5 of 3.
- skip-keeps-residual ("skip connections and MLPs stop the output from degeneration", abstract;
  Cor 3.1): per sequence at `skip_levels`, the attention skip keeps log10(r_L / r_0) above -1
  (a tenth of r_0). Assumption: the pure SAN of the same weights collapses on those inputs
  (its change, by the same rule, below -2 decades); otherwise the inputs show no collapse the
  skip could stop, and the finding is NOT TESTED.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

import pandas as pd
from pydantic import ConfigDict, Field, model_validator

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register, toy_sizes
from rankcollapse.experiments.verdicts import Assumption, Claim, Quote, check, decide, finding
from rankcollapse.plot import dong_bound_figure
from rankcollapse.seeds import Seed

NAME = "dong2021-bounds"

Variant = Literal["san-1head", "san", "san+mlp", "san+skip"]
VARIANTS: dict[Variant, dict] = {
    "san-1head": {"variant": "san", "n_heads": 1},
    "san": {"variant": "san"},
    "san+mlp": {"variant": "san+mlp", "mlp_skip": False},
    "san+skip": {"variant": "san+skip"},
}
BOUNDED = ("san-1head", "san", "san+mlp")
PURE_LOSS = 2.0  # decades the pure SAN must lose on the skip inputs for the skip finding to test


class Config(
    toy_sizes(n_layers=4, n_heads=2, d_model=4, n_tokens=4, n_samples=8)  # type: ignore[misc]
):
    """Toy networks at init, measured residual per layer and Dong's bounds from their weights.

    n_samples sequences per seed and level; san-1head always has 1 head.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    variants: list[Variant] = Field(default_factory=lambda: list(VARIANTS), min_length=1)
    """Variants to run (san-1head, san, san+mlp, san+skip)."""
    levels: list[float] = Field(default_factory=lambda: [0.5, 0.9, 0.99], min_length=1)
    """sqrt(c) r_0 of the inputs: the bound is informative below 1."""
    skip_levels: list[Annotated[float, Field(gt=1)]] = Field(
        default_factory=lambda: [10.0, 30.0], min_length=1
    )
    """sqrt(c) r_0 (> 1) of san+skip's extra inputs, where pure SAN of its weights collapses."""
    gamma: float = Field(1.0, gt=0)
    """The paper's softmax constant gamma used in c = 4 gamma beta / sqrt(d_qk)."""
    min_tested_layer: int = Field(2, ge=1)
    """bound-holds fails unless every layer 1..this one has a value above the float64 floor."""
    seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Seeds of weights and inputs (one unit per variant and seed)."""

    @model_validator(mode="after")
    def _levels_apart(self):
        if shared := set(self.levels) & set(self.skip_levels):
            raise ValueError(
                f"levels and skip_levels share {sorted(shared)}; give the skip's extra inputs "
                "levels of their own (> 1)"
            )
        return self


PRESETS = {
    "quick": {},
    # The paper states no experiment for its bounds; more seeds and sequences, same sizes (at
    # BERT's width the bound is five decades loose and testable at layer 1 only).
    "paper": {
        "n_layers": 6,
        "n_samples": 32,
        "levels": [0.5, 0.9, 0.99, 0.999],
        "seeds": list(range(10)),
    },
}


def units(config: Config) -> list[Unit]:
    return [{"variant": v, "seed": s} for v in config.variants for s in config.seeds]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    import torch

    from rankcollapse.nets import ToyNet, random_tokens, toy_config
    from rankcollapse.seeds import stream_seed
    from rankcollapse.theory import bound_frame, informative_inputs, toy_constants

    options = {"n_heads": config.n_heads, **VARIANTS[unit["variant"]]}
    size = {"n_layers": config.n_layers, "d_model": config.d_model, "seed": unit["seed"]}
    net = ToyNet(toy_config(options.pop("variant"), **size, **options))
    c = max(k.c for k in toy_constants(net, gamma=config.gamma))
    z = random_tokens(
        config.n_samples,
        config.n_tokens + 1,
        config.d_model,
        seed=stream_seed(unit["seed"], "data"),
    )
    skip = unit["variant"] == "san+skip"
    levels = config.levels + (config.skip_levels if skip else [])
    with torch.no_grad():
        x = informative_inputs(z, c, levels)
        frame = bound_frame(net, x, gamma=config.gamma, allow_skip=skip)
        if skip:  # the pure SAN of the same weights on the same inputs: what the skip stops
            pure = ToyNet(toy_config("san", **size, n_heads=config.n_heads))
            pure.load_state_dict(net.state_dict())
            pure_r = bound_frame(pure, x, gamma=config.gamma)
            pure_r = pure_r[pure_r["metric"] == "log10_r"].assign(metric="log10_r_pure")
            frame = pd.concat([frame, pure_r], ignore_index=True)
    frame.insert(0, "level", [levels[i // config.n_samples] for i in frame["sample"]])
    frame.insert(0, "seed", unit["seed"])
    frame.insert(0, "variant", unit["variant"])
    return frame


DOUBLY = Quote(
    "without skip connections or multi-layer perceptrons (MLPs), the output converges doubly "
    "exponentially to a rank-1 matrix",
    "abstract; Thm 2.2 (r_l <= c r_{l-1}^3), Cor 2.3",
)
SKIPS = Quote("skip connections and MLPs stop the output from degeneration", "abstract; Cor 3.1")
DECIDES = "--preset paper (10 seeds, 32 sequences per level)"


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    from rankcollapse.theory import bound_margins, log_ratios

    found: list[Claim] = []
    bounded = results[results["variant"].isin(BOUNDED)]
    if bounded.empty:
        return found
    ratios = log_ratios(bounded)
    per_seed = ratios.groupby("seed")["ratio"].median()
    per_variant = ratios.groupby("variant")["ratio"].median()
    found.append(
        finding(
            "cubic-contraction",
            says=DOUBLY,
            text="Pure SANs contract cubically: log rho_l / log rho_{l-1} is near 3.",
            quantity="|median log-residual ratio - 3| over a seed's pure-SAN layer steps above "
            "the float64 floor, per seed",
            values=per_seed.sub(3).abs().reindex(config.seeds).tolist(),  # no step: NaN, fails
            side="<",
            margin=0.5,  # within half of the exponent 3: apart from 2 (quadratic) and 4
            decides=DECIDES,
            note=f"{len(ratios)} layer steps; median ratio per variant "
            + ", ".join(f"{v}: {m:.3g}" for v, m in per_variant.items())
            + "; per seed "
            + ", ".join(f"{s}: {m:.3g}" for s, m in per_seed.items()),
        )
    )
    margins = bound_margins(bounded)
    by_layer = margins.assign(margin=margins[["one_step", "unrolled"]].min(axis=1))
    by_layer = by_layer.groupby("layer")["margin"].agg(["min", "size"])
    needed = set(range(1, config.min_tested_layer + 1))
    smallest = float(by_layer["min"].min()) if needed <= set(by_layer.index) else math.nan
    found.append(
        check(
            "bound-holds",
            f"Where informative, the per-layer and unrolled bounds (gamma = {config.gamma:g}) are "
            "never below the measured residual, at every layer above the float64 floor.",
            "smallest log10(bound / r_l) over informative sequences and layers (decades); NaN "
            f"unless every layer 1..{config.min_tested_layer} is tested",
            smallest,
            ">=",
            0.0,
            note="values checked per layer: "
            + ", ".join(f"{l}: {int(r['size'])}" for l, r in by_layer.iterrows())
            + f"; gamma = {config.gamma:g} because the paper's closed form of gamma (its "
            "appendix) is not reproduced: a check of the code's bound, not evidence for Thm 2.2",
        )
    )
    if "san+skip" in config.variants:
        found.append(_skip_claim(config, results))
    return found


def _skip_claim(config: Config, results: pd.DataFrame) -> Claim:
    """skip-keeps-residual on the inputs where the pure SAN of the same weights collapses: the
    one rule over the sequences, assuming the pure SAN loses decades on them (the one rule
    too: its interval below -PURE_LOSS decades)."""
    rows = results[
        (results["variant"] == "san+skip")
        & results["level"].isin(config.skip_levels)
        & results["layer"].isin([0, config.n_layers])
        & results["metric"].isin(["log10_r", "log10_r_pure"])
    ]
    wide = rows.pivot_table(index=["seed", "sample", "metric"], columns="layer", values="value")
    if {0, config.n_layers} <= set(wide.columns):
        change = (wide[config.n_layers] - wide[0]).unstack("metric")
    else:
        change = pd.DataFrame(columns=["log10_r", "log10_r_pure"])
    kept = change.get("log10_r", pd.Series(dtype=float))
    pure = change.get("log10_r_pure", pd.Series(dtype=float))
    collapse = decide(pure.clip(lower=-300.0), "<", -PURE_LOSS)  # -inf: exactly rank 1
    return finding(
        "skip-keeps-residual",
        says=SKIPS,
        text=f"With the attention skip, the residual keeps at least a tenth of its start over "
        f"{config.n_layers} layers on the sequences where the pure SAN of the same weights "
        "loses decades.",
        quantity=f"log10(r_L / r_0) of a san+skip sequence at sqrt(c) r_0 in "
        f"{config.skip_levels}, L = {config.n_layers} (decades), per sequence",
        values=kept.tolist(),
        side=">",
        margin=-1.0,  # a tenth of r_0: the pure SAN of the same weights loses decades
        assumptions=[
            Assumption(
                f"the pure SAN of the same weights collapses on these inputs (loses more than "
                f"{PURE_LOSS:g} decades)",
                collapse.verdict == "PASS",
                f"its change {collapse.describe()}: no collapse to stop",
            )
        ],
        decides=DECIDES,
        note=f"the pure SAN of the same weights on the same inputs: {collapse.describe()} "
        "decades (-inf, exactly rank 1, clipped at -300)",
    )


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    import torch

    from rankcollapse.metrics import dtype_floor
    from rankcollapse.theory import bound_margins, log_ratios

    margins = bound_margins(results[results["variant"].isin(BOUNDED)])
    margin_table = (
        margins.assign(margin=margins[["one_step", "unrolled"]].min(axis=1))
        .groupby(["variant", "layer"])["margin"]
        .agg(values="size", smallest="min", median="median")
        .reset_index()
    )
    rel = results[(results["metric"] == "res_comp_rel") & results["variant"].isin(BOUNDED)]
    above = rel[~rel["at_floor"].astype(bool)]
    last = int(above["layer"].max()) if len(above) else 0
    largest = float(above.loc[above["layer"] == last, "value"].max()) if len(above) else math.nan
    ratio = float(log_ratios(rel)["ratio"].median()) if len(above) else math.nan
    floor = dtype_floor(torch.float64)
    return Summary(
        tables={
            "bound margins per variant and layer (decades)": margin_table,
            "mean c per variant": results[results["metric"] == "c"]
            .groupby("variant")["value"]
            .mean()
            .rename("mean c")
            .reset_index(),
        },
        figures={
            "residual vs bounds": dong_bound_figure(
                results, **config.model_dump(include={"variants", "levels", "n_layers", "gamma"})
            )
        },
        claims=claims(config, results),
        notes=[
            (
                f"gamma = {config.gamma:g} (the paper's softmax constant; its closed form is in "
                "the paper's appendix). c includes H and, for san+mlp, lambda = max|act'| "
                "||W_1||_{1,inf} ||W_2||_{1,inf}."
            ),
            (
                f"Why the bound is tested up to layer {last} only: the largest relative residual "
                f"of a pure SAN above the float64 floor there is {largest:.3g}; one more step at "
                f"the measured log ratio {ratio:.3g} takes it to about {largest**ratio:.1g}, far "
                f"below the floor ({floor:.2g}). The "
                "measured residual falls doubly exponentially from any informative input, so in "
                "float64 the unrolled bound can be compared with it over two or three layers."
            ),
            (
                "Residuals are mean-centred; at_floor marks relative residuals at the float64 "
                "floor, left out of the ratio and bound findings and of the figure."
            ),
        ],
    )


register(
    Experiment(
        name=NAME,
        description="Toy SANs: measured residual per layer against Dong et al.'s cubic bounds.",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
