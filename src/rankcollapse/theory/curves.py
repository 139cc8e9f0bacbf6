"""mu curves per layer of toy and real networks under a mask (Wu et al. 2024, Sec. 4).

Wu et al. plot mu(X^l) = ||X^l - 1 gamma^T||_F against layer l for pure SAN, SAN+skip, SAN+LN,
SAN+skip+LN and the full transformer under several masks. These functions produce those
curves as tidy rows (..., variant, mask, mode, layer, sample, metric, value, at_floor):

- `toy_curves`: the toy network with Wu's dynamics (`rankcollapse.nets` variants `wu:*`:
  unit-sphere LayerNorm after the skip sum), one batched float64 pass per variant;
- `real_curves`: a real model through `rankcollapse.hf.probe` with the same `wu:*` variants
  and the mask replacing the model's own attention pattern, in eval and/or train mode
  (dropout on). A curve whose states overflow (NaN/Inf) is one row with metric `diverged`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.devices import DeviceName, resolve_dtype
from rankcollapse.errors import InputError
from rankcollapse.hf import LoadedModel, load_model, probe
from rankcollapse.masks import MaskSpecText
from rankcollapse.metrics import measure_layers
from rankcollapse.nets import ToyNet, random_tokens, toy_config
from rankcollapse.seeds import Seed, stream_seed
from rankcollapse.theory.rates import collapse_rates

CURVE_METRICS = ("mu", "mu_rel")
WuVariant = Literal["san", "san+skip", "san+ln", "san+skip+ln", "transformer"]
WU_VARIANTS: tuple[str, ...] = get_args(WuVariant)
"""Wu et al.'s five variants (the `wu:` prefix of the toy and hf variant tables dropped)."""


class ToySizes(BaseModel):
    """Sizes of the toy network and its Gaussian inputs (a config section of the Wu runs)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    n_layers: int = Field(64, ge=1)
    """Layers of the toy network."""
    d_model: int = Field(64, ge=2)
    """Width of the toy network."""
    n_tokens: int = Field(32, ge=4)
    """Tokens per toy sequence."""
    n_samples: int = Field(16, ge=1)
    """Toy sequences (one batch, one pass per mask and variant)."""


def toy_curves(
    variants: Sequence[str],
    mask: str,
    *,
    n_layers: int,
    d_model: int,
    n_tokens: int,
    n_samples: int,
    seed: int,
    temperature: float | None = None,
    metrics: Sequence[str] = CURVE_METRICS,
    device: torch.device | str = "cpu",
) -> pd.DataFrame:
    """Per-layer metrics of the toy network with Wu's dynamics, for each variant.

    Weights come from `seed`, the Gaussian tokens from its data stream (`stream_seed`), so
    the same tokens enter every variant and mask. `temperature` is the d_QK of the softmax
    scale 1/sqrt(d_QK) (None: the head's d_qk).

    Example:
        >>> frame = toy_curves(["san"], "causal", n_layers=2, d_model=4, n_tokens=3,
        ...                    n_samples=1, seed=0)
        >>> sorted(frame["layer"].unique().tolist()), sorted(frame["metric"].unique())
        ([0, 1, 2], ['mu', 'mu_rel'])
    """
    x = random_tokens(n_samples, n_tokens, d_model, seed=stream_seed(seed, "data")).to(device)
    frames = []
    for variant in variants:
        net = ToyNet(
            toy_config(
                f"wu:{variant}",
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
            measure_layers(states, metrics=list(metrics), source_dtype=net.dtype, variant=variant)
        )
    frame = pd.concat(frames, ignore_index=True)
    return frame.assign(model="toy", init="random", mask=mask, mode="eval")


class CurvesConfig(BaseModel):
    """What the curves of Wu et al.'s mask experiments read: masks, modes, sizes, dtypes, seed
    and device (experiments subclass it with their models and defaults)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    masks: list[MaskSpecText] = Field(
        ["complete", "causal", "window:1", "causal_window:1"], min_length=1
    )
    """Mask specs of rankcollapse.masks (e.g. complete, causal, window:1, causal_window:1)."""
    modes: list[Literal["eval", "train"]] = ["eval"]
    """Real models: eval (dropout off) and/or train mode (dropout on)."""
    toy: ToySizes = ToySizes()
    """Sizes of the toy network and its inputs."""
    float64_models: list[str] = ["smollm2"]
    """Real models run in float64: SmolLM2 without its norms overflows float32 (mu ~ 1e37)."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Parameter dtype of the other real models (metrics are float64, flagged at its floor)."""
    n_samples: int = Field(32, ge=1)
    """Text windows per real model."""
    n_tokens: int = Field(128, ge=4)
    """Tokens per window (real models)."""
    seed: Seed = 0
    """Seed of weights, toy tokens (its data stream) and window choice."""
    device: DeviceName = "cpu"
    """Where the networks run (auto: an accelerator when one is visible)."""


@functools.lru_cache(maxsize=1)
def load_real(
    name: str,
    init: str,
    *,
    seed: int,
    n_layers: int | None = None,
    double: bool = False,
    dtype: str = "float32",
    device: torch.device | str = "cpu",
) -> LoadedModel:
    """A real model by `rankcollapse.hf` name, placed on `device`, in `dtype` ("float32",
    "bfloat16", "float16"), or float64 when `double`; `n_layers` overrides the depth of a
    random init.

    The last one is kept per process: units of one model run one after another, and a fresh
    random init of a deep BERT costs more than probing it on a few windows.
    """
    overrides = {"num_hidden_layers": n_layers} if n_layers else None
    dtype = torch.float64 if double else resolve_dtype(dtype)
    return load_model(
        name, init=init, seed=seed, dtype=dtype, device=device, config_overrides=overrides
    )


def head_dim(loaded: LoadedModel) -> int:
    """Per-head query-key width of a loaded model (its own softmax uses 1/sqrt(head_dim))."""
    config = loaded.model.config
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def real_curves(
    loaded: LoadedModel,
    variants: Sequence[str],
    mask: str,
    *,
    modes: Sequence[str],
    n_samples: int,
    n_tokens: int,
    seed: int,
    temperature: float = 1.0,
    metrics: Sequence[str] = CURVE_METRICS,
) -> pd.DataFrame:
    """Per-layer metrics of a real model for each Wu variant and mode, via `hf.probe` (on the
    device the model was loaded on).

    `temperature` divides the logits on top of the model's own scaling. Train mode draws its
    dropout masks from `seed`. A curve whose hidden states overflow is kept as one row with
    metric `diverged` (value 1, layer NaN), so a claim over every curve sees it missing.
    """
    frames = []
    for mode, variant in itertools.product(modes, variants):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # the dropout masks of train mode
            try:
                frame = probe(
                    loaded,
                    variants=[f"wu:{variant}"],
                    mask=mask,
                    temperature=temperature,
                    train_mode=mode == "train",
                    n_samples=n_samples,
                    n_tokens=n_tokens,
                    metrics=list(metrics),
                    seed=seed,
                )
            except InputError as err:
                # Without its norms a model can overflow even float64's range: the curve is
                # lost, and the row says so.
                if "NaN" not in str(err) and "Inf" not in str(err):
                    raise
                frame = pd.DataFrame(
                    [{"variant": variant, "layer": np.nan, "sample": np.nan,
                      "metric": "diverged", "value": 1.0, "at_floor": False}]
                )  # fmt: skip
        frames.append(frame.assign(mask=mask, mode=mode))
    frame = pd.concat(frames, ignore_index=True)
    frame["variant"] = frame["variant"].str.removeprefix("wu:")
    return frame.assign(model=loaded.name, init=loaded.init)


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
