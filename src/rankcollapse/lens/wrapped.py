"""nnsight models: a `NNsight` or `LanguageModel` (nnsight's `Envoy`) wrapping a Hugging Face
model is measured as the model it wraps, with the wrapper's tokenizer. The wrapper keeps the
module in its `_module` attribute (nnsight has no public name for it); the probe's own hooks go
on that module, so the numbers are those of the wrapped model."""

from __future__ import annotations

from typing import Any

from torch import nn

from rankcollapse.errors import InputError


def is_nnsight(model: Any) -> bool:
    """Whether `model` is an nnsight wrapper (checked by class: nnsight is never imported).

    Example:
        >>> is_nnsight(nn.Linear(2, 2))
        False
    """
    return any(
        cls.__name__ == "Envoy" and cls.__module__.startswith("nnsight")
        for cls in type(model).__mro__
    )


def unwrap_nnsight(model: Any, tokenizer: Any = None) -> tuple[nn.Module, Any]:
    """(the torch module an nnsight wrapper holds, its tokenizer: `tokenizer` if given, else
    the wrapper's own when it holds a vocabulary, else None)."""
    module = getattr(model, "_module", None)
    if not isinstance(module, nn.Module):
        raise InputError(
            f"this {type(model).__name__} holds no torch module where nnsight keeps it "
            "(`_module`); pass the Hugging Face model itself."
        )
    if tokenizer is None and _has_vocabulary(getattr(model, "tokenizer", None)):
        tokenizer = model.tokenizer
    return module, tokenizer


def _has_vocabulary(tokenizer: Any) -> bool:
    """Whether a wrapper's tokenizer holds a vocabulary: a `LanguageModel` of a folder saved
    without tokenizer files holds an empty one, whose random ids would come from nothing (the
    model is then measured without a tokenizer: random ids from its config's vocabulary)."""
    try:
        return tokenizer is not None and len(tokenizer) > 0
    except TypeError:
        return False
