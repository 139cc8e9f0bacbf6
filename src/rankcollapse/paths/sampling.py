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

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.nets import SAN, Block, ToyNet, plain_layer_norm

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
    seed: int | torch.Generator,
    n_repeats: int = 1,
) -> Tensor:
    """Routes of `n_paths` paths of length `length`, drawn uniformly (with replacement).

    Each path picks `length` of the `n_layers` layers uniformly without replacement (the other
    layers are `SKIP`) and one head uniformly in each picked layer, so every one of the
    C(L, k) H^k paths of length k is equally likely. `seed` is an int or a torch generator
    (advanced by the draw, so consecutive samples from one generator are independent).

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
    generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)
    shape = (n_repeats, n_paths, n_layers)
    # The first `length` entries of a uniform random permutation are a uniform k-subset.
    order = torch.rand(shape, generator=generator).argsort(dim=-1)
    through_head = torch.zeros(shape, dtype=torch.bool).scatter(-1, order[..., :length], True)
    heads = torch.randint(n_heads, shape, generator=generator)
    return torch.where(through_head, heads, torch.full_like(heads, SKIP))


def path_restricted_forward(
    net: ToyNet, x: Tensor, routes: Tensor, *, normalise: bool = True
) -> Tensor:
    """Run `net` on `x` restricted to `routes`, summing the routes of each group (module doc).

    Args:
        net: a `ToyNet` without MLP blocks (Dong's SAN; any skip, norm, mask, heads).
        x: input tokens, shape (b, n, d_model).
        routes: long tensor (n_routes, n_layers) or (n_groups, n_routes, n_layers) with entries
            `SKIP`, `FULL` or a head index; every group is evaluated in the same batched pass.
        normalise: apply the non-affine LayerNorm after each head step and to the final sum.

    Returns:
        (b, n, d_model), or (n_groups, b, n, d_model) for grouped routes: the (normalised) sum
        of the routes' final states.

    Example:
        >>> from rankcollapse.nets import NetConfig, ToyNet
        >>> net = ToyNet(NetConfig(n_layers=2, n_heads=2, d_model=4, skip="on", norm="post"))
        >>> x = torch.randn(3, 5, 4, dtype=torch.float64)
        >>> full = torch.full((1, 2), FULL)
        >>> torch.equal(path_restricted_forward(net, x, full, normalise=False), net(x).output)
        True
    """
    n_layers = net.config.n_layers
    _check_routes(net, x, routes)
    grouped = routes.ndim == 3
    groups = routes if grouped else routes[None]
    n_groups, n_routes = groups.shape[:2]
    flat = groups.reshape(-1, n_layers)  # (s, L): every route of every group
    b, n, d = x.shape
    x = x.to(net.dtype)
    mask_bias = net.mask_bias(n, x.device)
    states = x.expand(len(flat), b, n, d)  # (s, b, n, d)
    for layer, block in enumerate(net.layers):
        choice = flat[:, layer]
        new_states = states.clone()
        through_head = (choice >= 0).nonzero().squeeze(1)
        if len(through_head):
            heads = choice[through_head]
            new_states[through_head] = _one_head(
                block, states[through_head], heads, mask_bias, normalise, net.config.norm_eps
            )
        whole = (choice == FULL).nonzero().squeeze(1)
        if len(whole):
            out, _ = block(states[whole].reshape(-1, n, d), mask_bias)
            new_states[whole] = out.reshape(len(whole), b, n, d)
        states = new_states
    total = states.reshape(n_groups, n_routes, b, n, d).sum(dim=1)
    if normalise:
        total = plain_layer_norm(total, eps=net.config.norm_eps)
    return total if grouped else total[0]


def restricted_logits(model: SAN, inputs: Tensor, routes: Tensor) -> Tensor:
    """Logits of a trained `SAN` restricted to each group of routes (the authors' evaluation).

    The embedding X^0 goes through `path_restricted_forward` of the SAN's body (normalised), then
    through its classifier: with one route of every entry `FULL` this is the full model.

    Returns:
        (n_groups, b, n, n_classes) for routes (n_groups, n_routes, n_layers), else (b, n, C).

    Example:
        >>> from rankcollapse.nets import SANConfig
        >>> model = SAN(SANConfig(inputs="points", n_classes=2, n_layers=2, d_model=4)).eval()
        >>> x = torch.randn(3, 5, 2)
        >>> whole = restricted_logits(model, x, torch.full((1, 2), FULL))
        >>> torch.equal(whole, model(x))
        True
    """
    routes = routes.to(model.classifier.weight.device)
    return model.classify(path_restricted_forward(model.body, model.embed(inputs), routes))


def _one_head(
    block: Block, states: Tensor, heads: Tensor, mask_bias: Tensor, normalise: bool, eps: float
) -> Tensor:
    """P_h(u) u W_h + 1 b_h^T for route states (m, b, n, d), head h per route, u = norm_in(Y)."""
    m, b, n, d = states.shape
    attn = block.attn
    u = block.norm_in(states.reshape(m * b, n, d))
    probs = attn.attention(u, mask_bias).reshape(m, b, -1, n, n)  # (m, b, H, n, n)
    picked = probs[torch.arange(m, device=probs.device), :, heads]  # (m, b, n, n)
    w_h = attn.head_matrices()[heads]  # (m, d, d)
    # Head h's own share of the biases: its value bias through its W_O slice, plus b_O.
    b_h = torch.einsum("hv,hvd->hd", attn.b_v, attn.w_o)[heads] + attn.b_o  # (m, d)
    out = picked @ u.reshape(m, b, n, d) @ w_h[:, None] + b_h[:, None, None, :]
    return plain_layer_norm(out, eps=eps) if normalise else out


def _check_routes(net: ToyNet, x: Tensor, routes: Tensor) -> None:
    config = net.config
    if config.mlp:
        raise ConfigError(
            "the path-restricted forward covers self-attention networks without MLP blocks "
            "(Dong's SAN); build the network with mlp=False."
        )
    if not isinstance(routes, Tensor) or routes.ndim not in (2, 3) or routes.dtype != torch.long:
        shape = tuple(routes.shape) if isinstance(routes, Tensor) else type(routes).__name__
        raise InputError(
            f"routes must be a long tensor (n_routes, n_layers) or (n_groups, n_routes, "
            f"n_layers), got {shape}; build them with sample_paths."
        )
    if routes.shape[-1] != config.n_layers or routes.shape[-2] == 0:
        raise InputError(
            f"routes have shape {tuple(routes.shape)} but the network has {config.n_layers} "
            "layers; give one entry per layer and at least one route."
        )
    bad = (routes < FULL) | (routes >= config.n_heads)
    if bad.any():
        raise InputError(
            f"route entry {int(routes[bad][0])} is not allowed; entries are SKIP ({SKIP}), "
            f"FULL ({FULL}) or a head index 0..{config.n_heads - 1}."
        )
    if x.ndim != 3 or x.shape[-1] != config.d_model:
        raise InputError(f"x must have shape (b, n, {config.d_model}), got {tuple(x.shape)}.")
