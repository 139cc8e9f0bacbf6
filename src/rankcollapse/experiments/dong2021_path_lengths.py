"""dong2021-path-lengths: how paths of a transformer distribute over their lengths.

Paper: Dong, Cordonnier, Loukas 2021 (arXiv 2103.03404), Sec. 3 and Fig. 3: with skip
connections a network of L layers and H heads has (H + 1)^L paths, C(L, k) H^k of length k, a
share of C(L, k) H^k / (H + 1)^L; for L = H = 12 the mass sits at k = 10..12.

Architectures: DistilBERT, BERT-base, BERT-large, GPT-2, a small Llama (SmolLM2-135M's shape),
and any local Hugging Face model directory the user adds, each read from its config alone.

This experiment counts; it measures nothing, so it states checks only (closed-form arithmetic on
L and H, which guard the counting code) and no finding. How much of a real output the paths of
each length carry is measured by `paths-by-length`.

Checks:
- bert-base-long-paths: in BERT-base the lengths 10..12 hold more than half of all paths.
- most-paths-are-long: in every architecture the most common length is at least 3/4 of L
  (the mean is L H / (H + 1)).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import Claim, check
from rankcollapse.plot import line_plot

NAME = "dong2021-path-lengths"
LONG_FRACTION = 0.75  # "long": at least this fraction of the depth


class Config(BaseModel):
    """Path-length distributions of named architectures (configs only: no weights are read)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    architectures: list[str] = Field(
        default_factory=lambda: ["distilbert", "bert-base", "bert-large", "gpt2", "llama-small"],
        min_length=1,
    )
    """Reference names (distilbert, bert-base, bert-large, gpt2, llama-small) or local model dirs."""
    skip: bool = True
    """Count with skip connections (without them every path has length L)."""

    @field_validator("architectures")
    @classmethod
    def _architectures_known(cls, names: list[str]) -> list[str]:
        from rankcollapse.paths import architecture_sizes

        for name in names:
            architecture_sizes(name)  # raises for an unknown name or a broken model folder
        return names


PRESETS: dict[str, dict[str, Any]] = {
    "quick": {},
    "paper": {},
}  # counting is exact and instant at any size


def units(config: Config) -> list[Unit]:
    return [{"architecture": name} for name in config.architectures]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    from rankcollapse.paths import architecture_paths

    df = architecture_paths(unit["architecture"], skip=config.skip)
    df["n_paths"] = df["n_paths"].astype(float)  # exact ints can pass 2^63; values are floats
    return df.melt(
        id_vars=["architecture", "n_layers", "n_heads", "length"],
        value_vars=["n_paths", "share"],
        var_name="metric",
    )


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    share = results[results["metric"] == "share"]
    found = []
    if "bert-base" in set(share["architecture"]):
        bert = share[share["architecture"] == "bert-base"]
        found.append(
            check(
                "bert-base-long-paths",
                "For L = H = 12 (BERT-base) the path count sits at lengths 10..12.",
                "share of BERT-base paths with length 10..12",
                float(bert.loc[bert["length"].between(10, 12), "value"].sum()),
                ">",
                0.5,
            )
        )
    if config.skip and len(share):
        modes = most_common_lengths(share)
        found.append(
            check(
                "most-paths-are-long",
                "In every architecture most paths are long: the most common length is near L.",
                "min over architectures of (most common length) / L",
                float(modes["mode_fraction"].min()),
                ">=",
                LONG_FRACTION,
                note=", ".join(
                    f"{a}: k={int(k)} of L={int(n)}"
                    for a, k, n in modes[["architecture", "length", "n_layers"]].values
                ),
            )
        )
    return found


def most_common_lengths(share: pd.DataFrame) -> pd.DataFrame:
    """Per architecture, the row of its most common path length, and that length / L."""
    modes = share.loc[share.groupby("architecture", sort=False)["value"].idxmax()]
    return modes.assign(mode_fraction=modes["length"] / modes["n_layers"])


def shape_labels(share: pd.DataFrame) -> pd.Series:
    """One label per (L, H): architectures of the same shape have the same curve, drawn once."""
    shapes = share.drop_duplicates("architecture").groupby(["n_layers", "n_heads"], sort=False)
    names = {key: " = ".join(part["architecture"]) for key, part in shapes}
    return pd.Series(
        [
            f"{names[(L, H)]} (L={L}, H={H})"
            for L, H in zip(share["n_layers"], share["n_heads"], strict=True)
        ],
        index=share.index,
    )


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    share = results[results["metric"] == "share"]
    curves = share.assign(
        architecture=shape_labels(share),
        **{"path length k / L": share["length"] / share["n_layers"]},
    )
    figure = line_plot(
        curves.drop_duplicates(["architecture", "length"]),
        x="path length k / L",
        hue="architecture",
        title="Paths by length / depth (skips " + ("on)" if config.skip else "off)"),
        ylabel="share of paths",
    )
    table = share.pivot_table(
        index="length", columns="architecture", values="value", sort=False
    ).reset_index()
    return Summary(
        tables={
            "share of paths per length": table,
            "most common length": most_common_lengths(share),
        },
        figures={"path length distribution": figure},
        claims=claims(config, results),
        notes=[
            "Counts are exact integers; shares are rounded once to float64.",
            (
                "Architectures with the same (L, H) have identical curves and are drawn as one "
                "line named after all of them."
            ),
            (
                "This experiment states checks only: counting paths measures nothing a paper "
                "could get wrong. The share of a real output carried by each length is measured "
                "by paths-by-length."
            ),
        ],
    )


register(
    Experiment(
        name=NAME,
        description="Number and share of paths of each length for real architectures (Dong Sec. 3).",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
