"""Models of interpretability libraries, measured like the Hugging Face models of `hf`.

- TransformerLens: a `HookedTransformer` in memory (`is_hooked_transformer`, `as_hooked` ->
  `HookedModel`) runs through its own hook points (`run_hooked`: residual stream at
  `hook_resid_pre` / `hook_resid_post`, attention at `hook_pattern`, variants, masks and
  temperature as hooks); `pip install -e ".[transformer-lens]"`.
- nnsight: a `LanguageModel` or `NNsight` wrapping a Hugging Face model is measured as the
  model it wraps (`unwrap_nnsight`); `pip install -e ".[nnsight]"`.

Neither library is imported here: models are recognised by their class.
"""

from rankcollapse.lens.hooked import (
    HookedModel,
    as_hooked,
    check_hooked_settings,
    check_hooked_variant,
    is_hooked_transformer,
    run_hooked,
)
from rankcollapse.lens.wrapped import is_nnsight, unwrap_nnsight

__all__ = [
    "HookedModel",
    "as_hooked",
    "check_hooked_settings",
    "check_hooked_variant",
    "is_hooked_transformer",
    "is_nnsight",
    "run_hooked",
    "unwrap_nnsight",
]
