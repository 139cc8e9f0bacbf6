"""`NetConfig`: every option of the toy attention network, validated before any weight is drawn."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rankcollapse.errors import invalid_config
from rankcollapse.masks import MaskSpec
from rankcollapse.seeds import Seed
from rankcollapse.sizes import SIZES, DModel, NHeads, NLayers


class NetConfig(BaseModel):
    """A toy attention network (see `ToyNet`). The defaults give the pure single-head
    self-attention network (no skip, no MLP, no norm) of Dong et al. 2021, which collapses.

    Constructing it with a bad key or value raises `ConfigError` naming the key.

    Example:
        >>> NetConfig(n_layers=2, skip="on").skip
        'on'
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    n_layers: NLayers = 12
    """Number of layers (blocks)."""
    n_heads: NHeads = 1
    """Attention heads per layer."""
    d_model: DModel = 64
    """Width of the token states."""
    d_qk: DModel | None = None
    """Per-head query-key rank; None = d_model // n_heads."""
    d_v: DModel | None = None
    """Per-head value width; None = d_model // n_heads."""
    skip: Literal["off", "on", "scaled"] = "off"
    """Attention skip: off = SA(X); on = X + SA(X); scaled = skip_scale * X + SA(X)."""
    skip_scale: float = Field(1.0, allow_inf_nan=False)
    """Factor on the skip (identity) branch when skip = "scaled"."""
    mlp: bool = False
    """Add a token-wise MLP block after each attention block."""
    d_mlp: int | None = Field(None, ge=1, le=4 * SIZES["d_model"].high)
    """Hidden width of the MLP; None = 4 * d_model."""
    activation: Literal["relu", "gelu", "tanh"] = "relu"
    """Nonlinearity of the MLP."""
    mlp_skip: bool = True
    """The MLP block has its own skip: X + MLP(X) (else MLP(X))."""
    norm: Literal["none", "pre", "post"] = "none"
    """Where the norm goes: pre = on the branch input; post = after the skip sum."""
    norm_kind: Literal["layernorm", "rmsnorm", "unit"] = "layernorm"
    """layernorm (centre, scale, gain); rmsnorm (scale, gain); unit (each token / its norm)."""
    norm_eps: float = Field(1e-5, gt=0)
    """Epsilon inside the square root of layernorm and rmsnorm (unit uses none)."""
    mask: MaskSpec = MaskSpec("complete")
    """Attention mask: a spec such as complete, causal, window:1 (see rankcollapse.masks)."""
    temperature: float | None = Field(None, gt=0, allow_inf_nan=False)
    """The d_QK of the softmax scale 1/sqrt(d_QK); None = the head's d_qk."""
    attention: Literal["softmax", "hardmax", "uniform"] = "softmax"
    """softmax; hardmax (one-hot on the argmax); uniform (mask-normalised ones)."""
    shared_weights: bool = False
    """One set of layer weights reused at every layer."""
    init_std: float | None = Field(None, gt=0, allow_inf_nan=False)
    """Std of the Gaussian init of every weight matrix; None = 1/sqrt(d_model)."""
    value_init: Literal["gaussian", "orthogonal"] = "gaussian"
    """orthogonal: W_V,h and the stacked W_O get orthonormal rows/columns (gain 1)."""
    out_proj: bool = True
    """Learned output projection W_O; off = heads concatenated (needs n_heads * d_v = d_model)."""
    bias: bool = False
    """Biases on Q, K, V, O, the MLP and layernorm (initialised to zero)."""
    dtype: Literal["float64", "float32"] = "float64"
    """Parameter and state dtype."""
    seed: Seed = 0
    """Seed of the weight draw: same config, same weights."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise invalid_config("NetConfig", err, NetConfig.model_fields) from None

    @model_validator(mode="after")
    def _head_sizes_fit(self) -> NetConfig:
        if (self.d_qk is None or self.d_v is None) and self.d_model < self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} < n_heads={self.n_heads}, so the default per-head size "
                "d_model // n_heads is 0; set d_qk and d_v explicitly or use fewer heads"
            )
        d_v = self.d_v or self.d_model // self.n_heads
        if not self.out_proj and self.n_heads * d_v != self.d_model:
            raise ValueError(
                f"out_proj=False concatenates the heads, so n_heads * d_v must equal d_model, "
                f"got {self.n_heads} * {d_v} != {self.d_model}; set d_v={self.d_model} // "
                "n_heads (if it divides) or out_proj=True"
            )
        return self
