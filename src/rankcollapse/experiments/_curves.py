"""The config the Wu et al. curve experiments share (wu2024-masks, wu2024-temperature): masks,
modes, toy sizes, real-model sizes, dtypes, seed and device, each parsed once into its type;
and the type of their variants, Wu et al.'s set named within it ("san+ln" is `wu:san+ln`)."""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, FilePath

from rankcollapse.devices import Device, Dtype
from rankcollapse.experiments._registry import toy_sizes
from rankcollapse.masks import MaskSpec, parse_mask_spec
from rankcollapse.seeds import Seed
from rankcollapse.sizes import NSamples, NTokens
from rankcollapse.variants import variant_type


class ToySizes(
    toy_sizes(n_layers=64, d_model=64, n_tokens=32, n_samples=16)  # type: ignore[misc]
):
    """Sizes of the toy network and its Gaussian inputs (one batch, one pass per mask and
    variant). A class of this module, so configs holding it pickle to worker processes."""


WuVariant = variant_type("wu", short=True)
"""A variant of Wu et al.'s set, given and stored by its name within the set ("san+ln"): results
and config hashes name it so; the curves take the `Variant` (`wu:san+ln`) as it is."""

CORE_MASKS = [parse_mask_spec(s) for s in ("complete", "causal", "window:1", "causal_window:1")]


class CurvesConfig(BaseModel):
    """What the curves of Wu et al.'s mask experiments read: masks, modes, sizes, dtypes, seed
    and device (experiments subclass it with their models and defaults)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    masks: list[MaskSpec] = Field(CORE_MASKS, min_length=1)
    """Mask specs of rankcollapse.masks (e.g. complete, causal, window:1, causal_window:1)."""
    modes: list[Literal["eval", "train"]] = ["eval"]
    """Real models: eval (dropout off) and/or train mode (dropout on)."""
    toy: ToySizes = ToySizes()
    """Sizes of the toy network and its inputs."""
    float64_models: list[str] = ["smollm2"]
    """Real models run in float64: SmolLM2 without its norms overflows float32 (mu ~ 1e37)."""
    dtype: Dtype = torch.float32
    """Parameter dtype of the other real models (metrics are float64, flagged at its floor)."""
    n_samples: NSamples = 32
    """Text windows per real model."""
    n_tokens: NTokens = Field(128, ge=4)
    """Tokens per window (real models)."""
    text: FilePath | None = None
    """A UTF-8 text file whose windows the real models read (None: the built-in corpus), for
    more windows than the corpus holds, e.g. Debian's fortunes: /usr/share/games/fortunes/science."""
    seed: Seed = 0
    """Seed of weights, toy tokens (its data stream) and window choice."""
    device: Device = torch.device("cpu")
    """Where the networks run (auto: an accelerator when one is visible)."""

    def model_dtype(self, model: str) -> torch.dtype:
        """The parameter dtype a real model runs in: float64 if listed, else `dtype`."""
        return torch.float64 if model in self.float64_models else self.dtype
