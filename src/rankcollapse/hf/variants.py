"""Architectural variants of real models, applied by forward hooks (never by editing model code).

A variant switches three parts of every block on or off: the attention skip, the MLP block, the
norms. Three sets (their names and parts are one table, `rankcollapse.variants`; this module
realises them):

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

The authors' surgery, prefixed `dong-authors:` (`dong-authors:san`, ...): what Dong et al.'s
published code did to BERT, ALBERT and XLNet, quirks included. For BERT and XLNet it is the
exact surgery below. For ALBERT their "no MLP" replaced `ffn` and `ffn_output` by identities,
so the block still computed full_layer_layer_norm(GELU(y) + y): a GELU, a residual and a norm.

How each switch is realised exactly (no subtraction, so a removed skip leaves no rounding trace):

Post-LN blocks (BERT family, ALBERT, DistilBERT, XLNet, DeBERTa-v2, OPT-350m):
y = Norm_a(x + A(x)), z = Norm_m(y + M(y)).
- attention skip removed: Norm_a acts on the attention branch alone, y = Norm_a(A(x)) (the
  authors' way). The branch is captured at `attention_branch` and fed to `attention_norm`.
- MLP block removed: the whole MLP sub-layer is the identity, z = y (drops its skip and its norm,
  as the authors did for BERT and XLNet).
- norms removed: Norm_a and Norm_m become identities (post-LN without norm: y = x + A(x)).

Pre-LN blocks (GPT-2, Llama, Mistral, Qwen, Gemma, Phi-3, OPT, T5's encoder, ViT):
y = x + A(Norm_a(x)), z = y + M(Norm_m(y)).
- attention skip removed: y = A(Norm_a(x)). The residual input (`residual_in`: the block, or
  T5's `layer.0`) receives zeros and the modules that read x (`reads_input`) receive x, so the
  sum 0 + A(...) is exact.
- MLP block removed: the MLP branch (`mlp_branch`) returns zeros, z = y + 0.
- norms removed: every norm of the residual stream becomes an identity (y = x + A(x)). The final
  norm after the last block is never part of a probe's states (they are raw block outputs).
  QK-norms (Qwen 3, OLMo 2) are part of the attention scores and stay.

The same switches cover three more block shapes:
- parallel residual (GPT-NeoX): z = x + A(Norm_a(x)) + M(Norm_m(x)). Skip removed:
  z = A(Norm_a(x)) + M(Norm_m(x)) (both norms read x); MLP removed: z = x + A(Norm_a(x)).
- sandwich norms (Gemma 2): y = x + N_a'(A(Norm_a(x))), z = y + N_m'(M(Norm_m(y))). Skip
  removed: y = N_a'(A(Norm_a(x))); MLP removed: N_m' returns zeros; norms removed: all four
  norms are identities.
- norms on branch outputs only (OLMo 2): y = x + N_a'(A(x)), z = y + N_m'(M(y)); as for Gemma 2,
  with x read by the attention module itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from rankcollapse.errors import ConfigError
from rankcollapse.hf.architectures import Architecture, block_list, submodule
from rankcollapse.variants import Variant


def describe(variant: Variant, arch: Architecture) -> str:
    """The exact meaning of `variant` for `arch`, naming the modules involved.

    Example:
        >>> from rankcollapse.hf.architectures import ARCHITECTURES
        >>> from rankcollapse.variants import VARIANTS
        >>> describe(VARIANTS["san"], ARCHITECTURES["bert"]).split(";")[0]
        'attention skip removed: attention.output.LayerNorm acts on attention.output.dropout alone'
    """
    if variant.family == "dong-authors" and not arch.authors_surgery:
        return "not defined (Dong et al.'s code covers bert, albert, xlnet)"
    parts = []
    if not variant.attention_skip:
        if arch.norm_position == "post":
            parts.append(
                f"attention skip removed: {arch.attention_norm} acts on "
                f"{arch.attention_branch} alone"
            )
        else:
            branch = (
                f"{arch.attention}({arch.attention_norm}(x))"
                if arch.attention_norm
                else (f"{arch.attention}(x)")
            )
            if arch.branch_norms:
                branch = f"{arch.branch_norms[0]}({branch})"
            if arch.parallel and variant.mlp:
                branch += f" + {arch.mlp_branch}({arch.mlp_norm}(x))"
            where = arch.residual_in or "the block"
            parts.append(
                f"attention skip removed: {where} outputs {branch} ({where} gets zeros as its "
                f"residual, {', '.join(arch.reads_input)} read x)"
            )
    if not variant.mlp:
        if variant.family == "dong-authors" and arch.authors_no_mlp:
            first, activation, last = arch.authors_no_mlp
            parts.append(
                f"MLP removed the authors' way: {first} and {last} are identities, so the "
                f"branch is {activation}(y) and its skip and {arch.mlp_norm} stay"
            )
        elif arch.norm_position == "post":
            parts.append(f"MLP sub-layer ({', '.join(arch.mlp)}, {arch.mlp_norm}) is the identity")
        else:
            parts.append(f"MLP branch {arch.mlp_branch} returns zeros (sub-layer = identity)")
    if not variant.norms:
        parts.append(f"{', '.join(_norms(arch))} are identities")
    if not parts:
        parts.append("unchanged model")
    return "; ".join(parts) + f" [{arch.block_kind}]"


def _norms(arch: Architecture) -> list[str]:
    """Every norm of the residual stream inside a block (never the QK-norms)."""
    names = [arch.attention_norm, arch.mlp_norm, *arch.branch_norms]
    return list(dict.fromkeys(n for n in names if n))


def _first_arg_replaced(args: tuple, kwargs: dict, name: str, value: torch.Tensor):
    if args:
        return (value, *args[1:]), kwargs
    return args, {**kwargs, name: value}


def _first_arg(args: tuple, kwargs: dict, name: str) -> torch.Tensor:
    return args[0] if args else kwargs[name]


def _main(output):
    return output[0] if isinstance(output, tuple) else output


def _part(block: nn.Module, path: str | None, arch: Architecture, variant: Variant) -> nn.Module:
    """The block's module at `path`, or an error: the variant is not defined for this model
    (its blocks lack the module, or its adapter names none)."""
    try:
        if path is not None:
            return submodule(block, path)
    except AttributeError:
        pass
    raise ConfigError(
        f"variant '{variant.name}' is not defined for this {arch.name} model: its blocks "
        f"have no module '{path}', which the {arch.name} adapter names for it. Use "
        "'transformer', or a model laid out like the library's own "
        f"{arch.name} (see rankcollapse/hf/architectures.py)."
    )


def _hook_block(block: nn.Module, arch: Architecture, variant: Variant) -> list:
    """Register this variant's hooks on one block; return the handles."""
    handles: list[Any] = []
    seen: dict[str, torch.Tensor] = {}
    if variant.is_identity:
        return handles
    # Resolve every part first, so a missing one fails before any hook is registered.
    norms = [_part(block, path, arch, variant) for path in _norms(arch)]

    def keep(key):
        def hook(module, args, output):
            seen[key] = _main(output)

        return hook

    def identity(module, args, output):
        return args[0]

    if arch.norm_position == "post":
        attention_norm = _part(block, arch.attention_norm, arch, variant)
        mlp_norm = _part(block, arch.mlp_norm, arch, variant)
        branch = _part(block, arch.attention_branch, arch, variant)
        authors = [_part(block, p, arch, variant) for p in arch.authors_no_mlp]
        if not variant.attention_skip:
            handles.append(branch.register_forward_hook(keep("branch")))
            handles.append(
                attention_norm.register_forward_pre_hook(
                    lambda m, args: (seen["branch"], *args[1:])
                )
            )
        if not variant.norms:
            handles += [norm.register_forward_hook(identity) for norm in norms]
        if not variant.mlp and variant.family == "dong-authors" and authors:
            # Their identities made the branch activation(y); the projections still run here
            # (their outputs are replaced), so shapes stay valid.
            first, activation, last = authors
            handles.append(first.register_forward_pre_hook(lambda m, args: seen.update(y=args[0])))
            handles.append(last.register_forward_hook(lambda m, args, out: activation(seen["y"])))
        elif not variant.mlp:
            # The attention sub-layer's output (registered after the identity hook: sees its result).
            handles.append(attention_norm.register_forward_hook(keep("mid")))
            handles.append(mlp_norm.register_forward_hook(lambda m, args, out: seen["mid"]))
        return handles

    residual_in = _part(block, arch.residual_in, arch, variant)
    readers = [_part(block, path, arch, variant) for path in arch.reads_input]
    mlp = _part(block, arch.mlp_branch, arch, variant)
    if not variant.attention_skip:

        def zero_residual(module, args, kwargs):
            seen["x"] = _first_arg(args, kwargs, "hidden_states")
            return _first_arg_replaced(args, kwargs, "hidden_states", torch.zeros_like(seen["x"]))

        def read_x(module, args, kwargs):
            return _first_arg_replaced(args, kwargs, "hidden_states", seen["x"])

        handles.append(residual_in.register_forward_pre_hook(zero_residual, with_kwargs=True))
        handles += [r.register_forward_pre_hook(read_x, with_kwargs=True) for r in readers]
    if not variant.norms:
        handles += [norm.register_forward_hook(identity) for norm in norms]
    if not variant.mlp:
        handles.append(mlp.register_forward_hook(lambda m, args, out: torch.zeros_like(out)))
    return handles


def check_variant(variant: Variant, arch: Architecture) -> None:
    """Fail before any work when `variant` is not defined for `arch`."""
    if variant.family == "dong-authors" and not arch.authors_surgery:
        raise ConfigError(
            f"variant '{variant.name}' reproduces Dong et al.'s code, which covers bert, albert "
            f"and xlnet only; this model is {arch.name}. Use "
            f"'{variant.short}' (the exact variant) instead."
        )


@contextmanager
def variant_applied(model: nn.Module, arch: Architecture, variant: Variant) -> Iterator[None]:
    """Apply `variant` to every block of a base model with hooks; remove them afterwards.
    The caller checked it once for this family (`check_variant`, as `applied` does)."""
    handles = []
    try:
        for block in block_list(model, arch):
            handles += _hook_block(block, arch, variant)
        yield
    finally:
        for handle in handles:
            handle.remove()
