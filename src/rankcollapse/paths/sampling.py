"""Path sampling and the path-restricted forward (Dong et al. 2021, Sec. 5, "path effectiveness").

A path through a network of `n_layers` layers with `n_heads` heads and skip connections picks, at
every layer, either the skip connection or one head. Its length is the number of layers where it
goes through a head: there are C(L, k) H^k paths of length k. A route is the integer vector of
those choices, one entry per layer: a head index 0..H-1, `SKIP` (-1), or `FULL` (-2: the whole
layer, i.e. no restriction there).

Path-restricted forward (the authors' evaluation, their `--no_sub_path` mode): each route is run
through the network on its own, with attention recomputed from the route's own hidden states:

    SKIP at layer l:   Y <- Y
    head h at layer l: Y <- norm(P_h(Y) Y W_h + 1 b^T)       (the head alone, no skip)
    FULL at layer l:   Y <- layer_l(Y)                       (the network's own layer)

and the routes' final states are summed and normalised: out = norm(sum_routes Y_route). `norm` is
the non-affine LayerNorm (centring and scaling to unit variance per token, no gain, no bias) used
by the authors for both steps; `normalise=False` drops it (sum of the routes, no norm at all).
With every entry `FULL` and one route the result is the network's output (passed through `norm`
when `normalise=True`): the restricted forward reduces to the full model.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rankcollapse.errors import ConfigError

SKIP = -1
"""Route entry: the layer's skip connection (the path does not go through any head there)."""

FULL = -2
"""Route entry: the whole layer, unrestricted (skip, every head, bias and norm)."""


def n_paths_of_length(n_layers: int, n_heads: int, length: int) -> int:
    """C(L, k) H^k: the number of paths of length k.

    Example:
        >>> n_paths_of_length(6, 2, 3)
        160
    """
    return math.comb(n_layers, length) * n_heads**length


def check_path_request(n_layers: int, n_heads: int, length: int, n_paths: int) -> None:
    """Raise ConfigError unless a path sample of this kind exists (checked before any work)."""
    if n_layers < 1 or n_heads < 1:
        raise ConfigError(
            f"paths need n_layers >= 1 and n_heads >= 1, got n_layers={n_layers}, "
            f"n_heads={n_heads}."
        )
    if not 0 <= length <= n_layers:
        raise ConfigError(
            f"path length k={length} is not possible in a network of {n_layers} layers; "
            f"choose k in 0..{n_layers}."
        )
    if n_paths <= 0:
        raise ConfigError(f"n_paths must be >= 1, got {n_paths}; ask for at least one path.")


def sample_paths(
    n_layers: int,
    n_heads: int,
    length: int,
    n_paths: int,
    *,
    seed: int,
    n_repeats: int = 1,
) -> Tensor:
    """Routes of `n_paths` paths of length `length`, drawn uniformly (with replacement).

    Each path picks `length` of the `n_layers` layers uniformly without replacement (the other
    layers are `SKIP`) and one head uniformly in each picked layer, so every one of the
    C(L, k) H^k paths of length k is equally likely.

    Returns:
        long tensor of shape (n_repeats, n_paths, n_layers) with entries in {SKIP, 0..H-1}:
        `n_repeats` independent samples of `n_paths` paths each.

    Example:
        >>> routes = sample_paths(4, 2, 1, 3, seed=0)
        >>> routes.shape, (routes != SKIP).sum(dim=-1).tolist()
        (torch.Size([1, 3, 4]), [[1, 1, 1]])
    """
    check_path_request(n_layers, n_heads, length, n_paths)
    if n_repeats < 1:
        raise ConfigError(f"n_repeats must be >= 1, got {n_repeats}.")
    generator = torch.Generator().manual_seed(seed)
    shape = (n_repeats, n_paths, n_layers)
    # The first `length` entries of a uniform random permutation are a uniform k-subset.
    order = torch.rand(shape, generator=generator).argsort(dim=-1)
    through_head = torch.zeros(shape, dtype=torch.bool).scatter(-1, order[..., :length], True)
    heads = torch.randint(n_heads, shape, generator=generator)
    return torch.where(through_head, heads, torch.full_like(heads, SKIP))
