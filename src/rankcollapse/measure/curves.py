"""mu curves under a mask, per Wu et al. variant and mode (Wu et al. 2024, Sec. 4), of real
models and of the toy network.

Wu et al. plot mu(X^l) = ||X^l - 1 gamma^T||_F against layer l for pure SAN, SAN+skip, SAN+LN,
SAN+skip+LN and the full transformer under several masks. Both give tidy rows (model, init,
variant, mask, mode, layer, sample, metric, value, at_floor):

- `real_curves`: a real model, through the probe's parts (`ProbeInputs`, `ProbeRequest`,
  `run_probe`) with the `wu:*` variants and the mask replacing the model's own attention
  pattern, in eval and/or train mode (dropout on). A curve whose states overflow (NaN/Inf) is
  one row with metric `diverged`.
- `toy_curves`: the toy network with Wu's dynamics (`rankcollapse.nets` variants `wu:*`:
  unit-sphere LayerNorm after the skip sum), one batched float64 pass per variant.

What the experiments read from curves of either (`curve_slopes`, `early_drop`) are formulas,
in `rankcollapse.theory.rates`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from rankcollapse.errors import NonFiniteError
from rankcollapse.hf import LoadedModel
from rankcollapse.masks import MaskSpec
from rankcollapse.measure.kinds import Measured
from rankcollapse.measure.probe import CPU, ModelSource, ProbeInputs, run_probe
from rankcollapse.measure.request import resolve_probe
from rankcollapse.metrics import measure_layers
from rankcollapse.variants import Variant

CURVE_METRICS = ("mu", "mu_rel")


@functools.lru_cache(maxsize=1)
def load_cached(source: ModelSource) -> LoadedModel | Measured:
    """`source.load()`, the last one kept per process: units of one model run one after
    another, and a fresh random init of a deep BERT costs more than probing it on a few
    windows."""
    return source.load()


def head_dim(loaded: LoadedModel | Measured) -> int:
    """Per-head query-key width of a loaded Hugging Face model (its own softmax uses
    1/sqrt(head_dim))."""
    config: Any = loaded.model.config  # a transformers config (torch types it as a Module)
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def real_curves(
    loaded: LoadedModel | Measured,
    variants: Sequence[Variant],
    mask: MaskSpec,
    *,
    modes: Sequence[str],
    n_samples: int,
    n_tokens: int,
    seed: int,
    text: Path | None = None,
    temperature: float = 1.0,
    metrics: Sequence[str] = CURVE_METRICS,
) -> pd.DataFrame:
    """Per-layer metrics of a real model for each of Wu et al.'s variants
    (`rankcollapse.variants.WU_VARIANTS`, named in the rows within their set: "san+ln") and
    mode, on the device the model was loaded on.

    `text` is a text file to take the windows from (None: the built-in corpus). `temperature`
    divides the logits on top of the model's own scaling. Train mode draws its dropout masks
    from `seed`. A curve whose hidden states overflow is kept as one row with
    metric `diverged` (value 1, layer NaN), so a claim over every curve sees it missing.
    """
    inputs = ProbeInputs(text=text, n_samples=n_samples, n_tokens=n_tokens, seed=seed)
    checked = resolve_probe(variants, mask, metrics, temperature=temperature)
    inputs.check_fits(checked)
    frames = []
    for mode, variant in itertools.product(modes, checked.variants):
        request = replace(checked, variants=(variant,), train_mode=mode == "train")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)  # the dropout masks of train mode
            try:
                frame = run_probe(loaded, inputs, request).assign(variant=variant.short)
            except NonFiniteError:
                # Without its norms a model can overflow even float64's range: the curve is
                # lost, and the row says so.
                frame = pd.DataFrame(
                    [
                        {
                            "variant": variant.short,
                            "layer": np.nan,
                            "sample": np.nan,
                            "metric": "diverged",
                            "value": 1.0,
                            "at_floor": False,
                        }
                    ]
                )
        frames.append(frame.assign(mask=str(mask), mode=mode))
    frame = pd.concat(frames, ignore_index=True)
    return frame.assign(model=loaded.name, init=loaded.init)


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
    from rankcollapse.nets import ToyNet, random_tokens, toy_config  # a probe never needs them
    from rankcollapse.seeds import stream_seed

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
