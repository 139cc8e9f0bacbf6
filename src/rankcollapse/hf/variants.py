"""Architectural variants of real models, applied by forward hooks (never by editing model code).

A variant switches three parts of every block on or off: the attention skip, the MLP block, the
norms. Two families:

Dong et al. 2021 (Fig. 1), names without prefix. LayerNorm stays in every variant.

| variant     | attention skip | MLP block | norms |
|-------------|----------------|-----------|-------|
| san         | removed        | removed   | kept  |
| san+mlp     | removed        | kept      | kept  |
| san+skip    | kept           | removed   | kept  |
| transformer | kept           | kept      | kept  |

Wu et al. 2024 (Sec. 4), prefixed `wu:`. The MLP block is removed except in the transformer.

| variant          | attention skip | MLP block | norms   |
|------------------|----------------|-----------|---------|
| wu:san           | removed        | removed   | removed |
| wu:san+skip      | kept           | removed   | removed |
| wu:san+ln        | removed        | removed   | kept    |
| wu:san+skip+ln   | kept           | removed   | kept    |
| wu:transformer   | kept           | kept      | kept    |

So `wu:san+ln` is Dong's `san` and `wu:san+skip+ln` is Dong's `san+skip`; Dong's `san` keeps
LayerNorm, Wu's does not.

How each switch is realised (exactly: no subtraction, so a removed skip leaves no rounding trace):

Post-LN blocks (BERT, RoBERTa, MiniLM, ALBERT, XLNet): y = Norm_a(x + A(x)), z = Norm_m(y + M(y)).
- attention skip removed: Norm_a acts on the attention branch alone, y = Norm_a(A(x)) (the
  authors' way). The branch is captured at `attention_branch` and fed to `attention_norm`.
- MLP block removed: the whole MLP sub-layer is the identity, z = y (drops its skip and its norm,
  as the authors did). ALBERT quirk: the authors' "no MLP" for ALBERT still left a GELU and a
  residual; here ALBERT's MLP sub-layer is an exact identity like every other model's.
- norms removed: Norm_a and Norm_m become identities (post-LN without norm: y = x + A(x)).

Pre-LN blocks (GPT-2, Llama): y = x + A(Norm_a(x)), z = y + M(Norm_m(y)).
- attention skip removed: y = A(Norm_a(x)) (the block receives zeros as its residual and the
  norm receives x, so the sum is exact).
- MLP block removed: M returns zeros, z = y.
- norms removed: Norm_a and Norm_m become identities (y = x + A(x)). The final norm after the
  last block is never part of a probe's states (they are raw block outputs).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from rankcollapse.errors import ConfigError, unknown_name
from rankcollapse.hf.architectures import Architecture, block_list, submodule


@dataclass(frozen=True)
class Variant:
    """Which parts of every block stay on."""

    name: str
    family: Literal["dong", "wu"]
    attention_skip: bool
    mlp: bool
    norms: bool

    @property
    def is_identity(self) -> bool:
        return self.attention_skip and self.mlp and self.norms


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("san", "dong", attention_skip=False, mlp=False, norms=True),
        Variant("san+mlp", "dong", attention_skip=False, mlp=True, norms=True),
        Variant("san+skip", "dong", attention_skip=True, mlp=False, norms=True),
        Variant("transformer", "dong", attention_skip=True, mlp=True, norms=True),
        Variant("wu:san", "wu", attention_skip=False, mlp=False, norms=False),
        Variant("wu:san+skip", "wu", attention_skip=True, mlp=False, norms=False),
        Variant("wu:san+ln", "wu", attention_skip=False, mlp=False, norms=True),
        Variant("wu:san+skip+ln", "wu", attention_skip=True, mlp=False, norms=True),
        Variant("wu:transformer", "wu", attention_skip=True, mlp=True, norms=True),
    )
}
DONG_VARIANTS = ["san", "san+mlp", "san+skip", "transformer"]
WU_VARIANTS = ["wu:san", "wu:san+skip", "wu:san+ln", "wu:san+skip+ln", "wu:transformer"]


def get_variant(name: str) -> Variant:
    """The variant called `name` ("dong:san" is accepted for "san").

    Example:
        >>> get_variant("wu:san+ln").norms
        True
    """
    key = name.removeprefix("dong:")
    if key not in VARIANTS:
        raise unknown_name("variant", name, VARIANTS)
    return VARIANTS[key]


def describe(variant: Variant, arch: Architecture) -> str:
    """The exact meaning of `variant` for `arch`, naming the modules involved.

    Example:
        >>> from rankcollapse.hf.architectures import ARCHITECTURES
        >>> describe(VARIANTS["san"], ARCHITECTURES["bert"]).split(";")[0]
        'attention skip removed: attention.output.LayerNorm acts on attention.output.dropout alone'
    """
    parts = []
    if not variant.attention_skip:
        if arch.norm_position == "post":
            parts.append(
                f"attention skip removed: {arch.attention_norm} acts on "
                f"{arch.attention_branch} alone"
            )
        else:
            parts.append(
                f"attention skip removed: block output = {arch.attention}({arch.attention_norm}(x))"
            )
    if not variant.mlp:
        if arch.norm_position == "post":
            parts.append(f"MLP sub-layer ({', '.join(arch.mlp)}, {arch.mlp_norm}) is the identity")
        else:
            parts.append(f"MLP branch {arch.mlp[-1]} returns zeros (sub-layer = identity)")
    if not variant.norms:
        parts.append(f"{arch.attention_norm} and {arch.mlp_norm} are identities")
    if not parts:
        parts.append("unchanged model")
    pos = "post-LN" if arch.norm_position == "post" else "pre-LN"
    return "; ".join(parts) + f" [{pos}]"


def _first_arg_replaced(args: tuple, kwargs: dict, name: str, value: torch.Tensor):
    if args:
        return (value, *args[1:]), kwargs
    return args, {**kwargs, name: value}


def _first_arg(args: tuple, kwargs: dict, name: str) -> torch.Tensor:
    return args[0] if args else kwargs[name]


def _main(output):
    return output[0] if isinstance(output, tuple) else output


def _part(block: nn.Module, path: str, arch: Architecture, variant: Variant) -> nn.Module:
    """The block's module at `path`, or an error: the variant is not defined for this model."""
    try:
        return submodule(block, path)
    except AttributeError:
        raise ConfigError(
            f"variant '{variant.name}' is not defined for this {arch.name} model: its blocks "
            f"have no module '{path}', which the {arch.name} adapter names for it. Use "
            "'transformer', or a model laid out like the library's own "
            f"{arch.name} (see rankcollapse/hf/architectures.py)."
        ) from None


def _hook_block(block: nn.Module, arch: Architecture, variant: Variant) -> list:
    """Register this variant's hooks on one block; return the handles."""
    handles = []
    seen: dict[str, torch.Tensor] = {}
    if variant.is_identity:
        return handles
    # Resolve every part first, so a missing one fails before any hook is registered.
    attention_norm = _part(block, arch.attention_norm, arch, variant)
    mlp_norm = _part(block, arch.mlp_norm, arch, variant)
    branch = _part(block, arch.attention_branch, arch, variant)
    mlp = _part(block, arch.mlp[-1], arch, variant)

    def keep(key):
        def hook(module, args, output):
            seen[key] = _main(output)

        return hook

    def identity(module, args, output):
        return args[0]

    if arch.norm_position == "post":
        if not variant.attention_skip:
            handles.append(branch.register_forward_hook(keep("branch")))
            handles.append(
                attention_norm.register_forward_pre_hook(
                    lambda m, args: (seen["branch"], *args[1:])
                )
            )
        if not variant.norms:
            handles.append(attention_norm.register_forward_hook(identity))
            handles.append(mlp_norm.register_forward_hook(identity))
        if not variant.mlp:
            # The attention sub-layer's output (registered after the identity hook: sees its result).
            handles.append(attention_norm.register_forward_hook(keep("mid")))
            handles.append(mlp_norm.register_forward_hook(lambda m, args, out: seen["mid"]))
        return handles

    if not variant.attention_skip:

        def zero_residual(module, args, kwargs):
            seen["x"] = _first_arg(args, kwargs, "hidden_states")
            return _first_arg_replaced(args, kwargs, "hidden_states", torch.zeros_like(seen["x"]))

        handles.append(block.register_forward_pre_hook(zero_residual, with_kwargs=True))
        handles.append(
            attention_norm.register_forward_pre_hook(lambda m, args: (seen["x"], *args[1:]))
        )
    if not variant.norms:
        handles.append(attention_norm.register_forward_hook(identity))
        handles.append(mlp_norm.register_forward_hook(identity))
    if not variant.mlp:
        handles.append(mlp.register_forward_hook(lambda m, args, out: torch.zeros_like(out)))
    return handles


@contextmanager
def variant_applied(model: nn.Module, arch: Architecture, variant: Variant | str) -> Iterator[None]:
    """Apply `variant` to every block of a base model with hooks; remove them afterwards."""
    variant = get_variant(variant) if isinstance(variant, str) else variant
    handles = []
    try:
        for block in block_list(model, arch):
            handles += _hook_block(block, arch, variant)
        yield
    finally:
        for handle in handles:
            handle.remove()
