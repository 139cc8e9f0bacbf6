"""Models of interpretability libraries, measured like the Hugging Face models of `hf`.

- TransformerLens 3: a `HookedTransformer` in memory (`is_hooked_transformer`, `as_hooked` ->
  `HookedModel`) runs through its own hook points (`run_hooked`: residual stream at
  `hook_resid_pre` / `hook_resid_post`, attention at `hook_pattern`, variants, masks and
  temperature as hooks); `pip install -e ".[transformer-lens]"`. TransformerLens 4 removed
  the class: there no model is one, and the bridge is measured in its place.
- TransformerLens's `TransformerBridge` (TransformerLens 4's model class, also in 3.9:
  `is_transformer_bridge`, `as_bridge` -> `BridgeModel`, `run_bridge`): residual stream at its
  blocks' `hook_in` / `hook_out` (`hook_resid_pre` / `hook_resid_post`), attention at
  `attn.hook_pattern`; measured as it is (no variants, masks or temperature).
- nnsight: a `LanguageModel` or `NNsight` wrapping a Hugging Face model is measured as the
  model it wraps (`unwrap_nnsight`); `pip install -e ".[nnsight]"`.

Neither library is imported here: models are recognised by their class.
"""

from rankcollapse.lens.bridge import (
    BridgeModel,
    as_bridge,
    check_bridge_settings,
    check_bridge_variant,
    is_transformer_bridge,
    run_bridge,
    stream_bridge,
)
from rankcollapse.lens.hooked import (
    HookedModel,
    as_hooked,
    check_hooked_settings,
    check_hooked_variant,
    is_hooked_transformer,
    run_hooked,
    stream_hooked,
)
from rankcollapse.lens.wrapped import is_nnsight, unwrap_nnsight

__all__ = [
    "BridgeModel",
    "HookedModel",
    "as_bridge",
    "as_hooked",
    "check_bridge_settings",
    "check_bridge_variant",
    "check_hooked_settings",
    "check_hooked_variant",
    "is_hooked_transformer",
    "is_nnsight",
    "is_transformer_bridge",
    "run_bridge",
    "run_hooked",
    "stream_bridge",
    "stream_hooked",
    "unwrap_nnsight",
]
