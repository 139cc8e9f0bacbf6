"""Exact path decompositions of a frozen network (Dong et al. 2021, Sec. 3).

Two independent computations of the same sum:

- `decompose_by_length`: the total of all paths of each length k = 0..L, without enumerating
  them. With the attention (and norm scales, MLP gates) frozen,
      C^l_k = skip * C^{l-1}_k + sum_h P^l_h C^{l-1}_{k-1} W^l_h,
  one multi-head application per length per layer: O(L^2) head applications in all.
- `enumerate_paths`: every path's term separately ((H + 1)^L of them with skips), for small
  toy networks; refuses more than `max_paths` terms.

In both, the biases (value/output biases, norm shifts, MLP biases) flow into one separate bias
term, pushed through later layers like any activation, so that
    output = sum of the components + bias term
exactly (to float64 rounding). Without norms and MLPs the bias term is row-constant, 1 b^T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.errors import ConfigError
from rankcollapse.paths.frozen import FrozenAttention, FrozenNet, FrozenNorm, Sublayer
from rankcollapse.paths.sampling import SKIP  # one step convention for sampled and enumerated paths

#: Default limit of `enumerate_paths`: 65,536 = the L = 8, H = 3 benchmark network, with room.
MAX_PATHS = 100_000


@dataclass(frozen=True)
class LengthDecomposition:
    """Per-length totals: `components[k]` is the sum of all paths through exactly k heads.

    components: (L + 1, b, n, d); bias: (b, n, d); output = components.sum(0) + bias.
    """

    components: Tensor
    bias: Tensor

    @property
    def output(self) -> Tensor:
        return self.components.sum(0) + self.bias


@dataclass(frozen=True)
class Enumeration:
    """Every path's term: `terms[i]` (b, n, d) for `paths[i]`, one step per sublayer.

    A step is SKIP (-1) or the index of the branch taken (a head, or 0 for an MLP; in a parallel
    block, the heads, then the MLP).
    """

    terms: Tensor  # (n_paths, b, n, d)
    paths: list[tuple[int, ...]]
    lengths: Tensor  # (n_paths,) number of attention heads on each path
    bias: Tensor

    @property
    def output(self) -> Tensor:
        return self.terms.sum(0) + self.bias


def _norm_affine(norm: FrozenNorm | None, parts: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """Apply a frozen norm to stacked linear parts (..., b, n, d) and the bias term."""
    if norm is None:
        return parts, bias
    scale = norm.token_scale(parts.sum(0) + bias)  # frozen from the real activation
    shift = norm.constant()
    bias = norm.linear(bias, scale)
    return norm.linear(parts, scale), bias + shift if shift is not None else bias


def _branch_inputs(sub: Sublayer, parts: Tensor, bias: Tensor):
    """The branch's inputs (pre-norm applied) and its frozen gate."""
    inputs, input_bias = _norm_affine(sub.norm_in, parts, bias)
    gate = sub.branch.gate(inputs.sum(0) + input_bias)
    return inputs, input_bias, gate


def _branch_output(sub: Sublayer, parts: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """Per-length parts of norm_branch(branch(norm_in(x))) (one length longer for heads)."""
    inputs, input_bias, gate = _branch_inputs(sub, parts, bias)
    through = sub.branch.linear(inputs, gate)
    out_bias = sub.branch.linear(input_bias, gate) + sub.branch.constant(gate)
    through, out_bias = _norm_affine(sub.norm_branch, through, out_bias)
    if sub.branch.counts:  # a head adds one to the length
        through = torch.cat([torch.zeros_like(through[:1]), through])
    return through, out_bias


def _add_by_length(a: Tensor, b: Tensor) -> Tensor:
    """a + b for per-length stacks (k, ...) of different counts k: the missing lengths are 0."""
    if len(a) < len(b):
        a, b = b, a
    return torch.cat([a[: len(b)] + b, a[len(b) :]])


@torch.no_grad()
def decompose_by_length(net: FrozenNet) -> LengthDecomposition:
    """Sum of all paths of each length k = 0..L, by the recursion of Dong et al. Sec. 3.

    Formula: C^l_k = s C^{l-1}_k + sum_h P^l_h C^{l-1}_{k-1} W^l_h (s = skip scale), with
        C^0_0 = X; norms and MLPs enter as linear maps with frozen scales and gates, a
        parallel branch adds its own terms at the same step.
    Reference: Dong, Cordonnier, Loukas 2021, Sec. 3 (path decomposition).

    Args:
        net: a network frozen at its input (see `freeze_toy`, `freeze_real`).

    Returns:
        `LengthDecomposition` with L + 1 components and the bias term.

    Example:
        >>> from rankcollapse.paths.frozen import FrozenAttention, FrozenNet, Sublayer
        >>> x = torch.eye(2, dtype=torch.float64)[None]  # (1, 2, 2)
        >>> attn = FrozenAttention(torch.full((1, 1, 2, 2), 0.5, dtype=torch.float64),
        ...                        2 * torch.eye(2, dtype=torch.float64)[None],
        ...                        torch.eye(2, dtype=torch.float64)[None])
        >>> parts = decompose_by_length(FrozenNet(x, [Sublayer(attn, skip=1.0)])).components
        >>> parts[0, 0].tolist(), parts[1, 0].tolist()
        ([[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]])
    """
    parts = net.x[None]  # (1, b, n, d): the empty path carries the input
    bias = torch.zeros_like(net.x)
    for sub in net.sublayers:
        through, new_bias = _branch_output(sub, parts, bias)
        if sub.parallel is not None:
            other, other_bias = _branch_output(sub.parallel, parts, bias)
            through, new_bias = _add_by_length(through, other), new_bias + other_bias
        if sub.skip:
            through = _add_by_length(through, sub.skip * parts)
            new_bias = new_bias + sub.skip * bias
        parts, bias = _norm_affine(sub.norm_out, through, new_bias)
    return LengthDecomposition(parts, bias)  # without skips, lengths below L stay exactly 0


def count_enumerated(net: FrozenNet) -> int:
    """How many terms `enumerate_paths` would produce: prod over sublayers of (branches + skip)."""
    return math.prod(
        s.branch.n_branches
        + (s.parallel.branch.n_branches if s.parallel is not None else 0)
        + (1 if s.skip else 0)
        for s in net.sublayers
    )


def _branch_terms(sub: Sublayer, terms: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """Every branch's terms, stacked branch-major, with the branch norm applied, and its bias."""
    inputs, input_bias, gate = _branch_inputs(sub, terms, bias)
    each = torch.cat([sub.branch.branch(inputs, i, gate) for i in range(sub.branch.n_branches)])
    out_bias = sub.branch.linear(input_bias, gate) + sub.branch.constant(gate)
    return _norm_affine(sub.norm_branch, each, out_bias)


@torch.no_grad()
def enumerate_paths(net: FrozenNet, *, max_paths: int = MAX_PATHS) -> Enumeration:
    """Every path's term separately (exponential: for small toy networks only).

    In a network without norms and MLPs, the term of path (h_1, ..., h_L) is
    P_path X W_path with P_path = P^L_{h_L} ... P^1_{h_1} and W_path = W^1_{h_1} ... W^L_{h_L}
    (the skip acting as P = I, W = s I); with norms and MLPs, their frozen linear maps sit in
    between. Terms are built breadth-first, sharing every common prefix.

    Raises:
        ConfigError: when the network has more than `max_paths` paths.

    Example:
        >>> from rankcollapse.paths.frozen import FrozenAttention, FrozenNet, Sublayer
        >>> x = torch.eye(2, dtype=torch.float64)[None]
        >>> attn = FrozenAttention(torch.full((1, 2, 2, 2), 0.5, dtype=torch.float64),
        ...                        torch.eye(2, dtype=torch.float64).repeat(2, 1, 1),
        ...                        torch.eye(2, dtype=torch.float64).repeat(2, 1, 1))
        >>> result = enumerate_paths(FrozenNet(x, [Sublayer(attn, skip=1.0)]))
        >>> result.paths, result.lengths.tolist()
        ([(-1,), (0,), (1,)], [0, 1, 1])
    """
    total = count_enumerated(net)
    if total > max_paths:
        raise ConfigError(
            f"the network has {total:,} paths, more than max_paths = {max_paths:,} that "
            "enumerate_paths computes one by one; use decompose_by_length for the total of each "
            "length (exact, O(L^2) head applications), or raise max_paths for a small network."
        )
    terms = net.x[None]
    bias = torch.zeros_like(net.x)
    paths: list[tuple[int, ...]] = [()]
    lengths = [0]
    for sub in net.sublayers:
        branches = [sub] if sub.parallel is None else [sub, sub.parallel]
        blocks = [sub.skip * terms] if sub.skip else []
        adds = [0] if sub.skip else []
        new_bias = sub.skip * bias if sub.skip else torch.zeros_like(bias)
        for part in branches:
            each, part_bias = _branch_terms(part, terms, bias)
            blocks.append(each)
            adds += [int(part.branch.counts)] * part.branch.n_branches
            new_bias = new_bias + part_bias
        terms, bias = _norm_affine(sub.norm_out, torch.cat(blocks), new_bias)
        steps = ([SKIP] if sub.skip else []) + list(range(len(adds) - (1 if sub.skip else 0)))
        paths = [path + (step,) for step in steps for path in paths]
        lengths = [length + add for add in adds for length in lengths]
    return Enumeration(terms, paths, torch.tensor(lengths), bias)


@torch.no_grad()
def path_matrices(net: FrozenNet, path: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """P_path (b, n, n) and W_path (d, d) of one path of a network without norms and MLPs.

    Steps as in `Enumeration.paths`: SKIP (-1) or a head index per layer.
    """
    if len(path) != len(net.sublayers):
        raise ConfigError(
            f"path {path} has {len(path)} steps but the network has {len(net.sublayers)} "
            "sublayers; give one step (a head index, or -1 for the skip) per sublayer."
        )
    b, n, d = net.x.shape
    p_path = torch.eye(n, dtype=net.x.dtype, device=net.x.device).expand(b, n, n)
    w_path = torch.eye(d, dtype=net.x.dtype, device=net.x.device)
    for sub, step in zip(net.sublayers, path, strict=True):
        if (
            not isinstance(sub.branch, FrozenAttention)
            or sub.norm_in
            or sub.norm_out
            or (sub.norm_branch or sub.parallel)
        ):
            raise ConfigError(
                "path_matrices needs a network of attention layers without norms or MLPs; "
                "use enumerate_paths for the terms of other networks."
            )
        if step == SKIP and not sub.skip:
            raise ConfigError(
                f"path {path} takes the skip at a layer without one; use a head index there."
            )
        if step == SKIP:
            w_path = w_path * sub.skip
        else:
            p_path = sub.branch.probs[:, step] @ p_path
            w_path = w_path @ sub.branch.w_v[step] @ sub.branch.w_o[step]
    return p_path, w_path
