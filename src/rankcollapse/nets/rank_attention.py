"""Attention with the query-key rank decoupled from the width and the number of heads.

Amsel, Yehudai, Bruna 2024 (arXiv 2407.16153), Sec. 3: head h has W_Q,h, W_K,h in R^{r x d}
(rank r = `d_qk`, free of d and H) and a full value-output map M_h in R^{d x d}:

    f(Y, X)_i = sum_h sum_j softmax_j( <W_Q,h y_i, W_K,h x_j> ) M_h x_j,

with a hardmax variant (one-hot on the argmax, the zero-temperature limit). Queries Y and
keys X are separate (cross-attention, the theory); pass Y = X for self-attention.

- `RankAttention`: one layer, any dtype (float32 to train, float64 for constructions).
- `StackedRankAttention`: many (r, H, seed) configurations as one module, the heads of
  every configuration side by side, so one optimiser step trains them all.

The off-the-shelf encoder of Sec. 7 is `rankcollapse.nets.rank_encoder.RankEncoder`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from rankcollapse.errors import ConfigError
from rankcollapse.nets.layers import hardmax


def check_rank_heads(d_model: int, d_qk: int, n_heads: int) -> None:
    """Raise ConfigError unless 1 <= d_qk <= d_model and n_heads >= 1."""
    if d_model < 1:
        raise ConfigError(f"d_model={d_model}; attention needs d_model >= 1.")
    if not 1 <= d_qk <= d_model:
        raise ConfigError(
            f"query-key rank d_qk={d_qk} is not allowed for d_model={d_model}: the rank of "
            f"W_Q^T W_K is at most d, so pass 1 <= d_qk <= {d_model}."
        )
    if n_heads < 1:
        raise ConfigError(f"n_heads={n_heads}; a layer needs at least one head (n_heads >= 1).")


def softmax(scores: Tensor, dim: int = -1) -> Tensor:
    """Softmax over axis `dim` (default the last), written out: torch's kernel is several times
    slower on rows as short as a set of N = 8 points (measured on CPU, forward and backward).

    Example:
        >>> softmax(torch.tensor([[0.0, 0.0], [1000.0, 0.0]]))
        tensor([[0.5000, 0.5000],
                [1.0000, 0.0000]])
    """
    e = (scores - scores.detach().amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def rank_attention(
    queries: Tensor, x: Tensor, w_q: Tensor, w_k: Tensor, w_o: Tensor, *, hard: bool = False
) -> Tensor:
    """The generalised multi-head layer, per head: sum_j softmax_j(<W_Q y, W_K x_j>) M x_j.

    Args:
        queries: (..., q, d). x: keys and values, (..., n, d).
        w_q, w_k: (..., H, r, d). w_o: the maps M_h, (..., H, d, d). Leading axes broadcast.
        hard: hardmax instead of softmax.

    Returns:
        per-head outputs, shape (..., H, q, d); sum over the head axis for the layer output.
    """
    q = torch.einsum("...id,...hrd->...hir", queries, w_q)  # (..., H, q, r)
    k = torch.einsum("...jd,...hrd->...hjr", x, w_k)  # (..., H, n, r)
    scores = q @ k.transpose(-1, -2)  # (..., H, q, n)
    weights = hardmax(scores) if hard else softmax(scores)
    values = torch.einsum("...jd,...hed->...hje", x, w_o)  # M_h x_j: (..., H, n, d)
    return weights @ values  # (..., H, q, d)


def init_rank_weights(
    d_model: int, d_qk: int, n_heads: int, *, seed: int, dtype: torch.dtype = torch.float32
) -> tuple[Tensor, Tensor, Tensor]:
    """Seeded initial (w_q, w_k, w_o) of shapes (H, r, d), (H, r, d), (H, d, d).

    W_Q, W_K have N(0, 1/d) entries (unit-scale scores on unit inputs); M_h has N(0, 1/(d H))
    entries so the layer output starts at unit scale whatever H is.
    """
    check_rank_heads(d_model, d_qk, n_heads)
    g = torch.Generator().manual_seed(seed)
    std_qk, std_o = 1 / math.sqrt(d_model), 1 / math.sqrt(d_model * n_heads)
    w_q = torch.randn(n_heads, d_qk, d_model, generator=g, dtype=torch.float64) * std_qk
    w_k = torch.randn(n_heads, d_qk, d_model, generator=g, dtype=torch.float64) * std_qk
    w_o = torch.randn(n_heads, d_model, d_model, generator=g, dtype=torch.float64) * std_o
    return w_q.to(dtype), w_k.to(dtype), w_o.to(dtype)


class RankAttention(nn.Module):
    """H heads of query-key rank r on d-dimensional tokens, soft or hard.

    Example:
        >>> layer = RankAttention(4, d_qk=1, n_heads=3, seed=0)
        >>> layer(torch.randn(2, 5, 1, 4), torch.randn(2, 5, 6, 4)).shape
        torch.Size([2, 5, 1, 4])
    """

    def __init__(
        self,
        d_model: int,
        *,
        d_qk: int,
        n_heads: int,
        hard: bool = False,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        w_q, w_k, w_o = init_rank_weights(d_model, d_qk, n_heads, seed=seed, dtype=dtype)
        self.d_model, self.d_qk, self.n_heads, self.hard = d_model, d_qk, n_heads, hard
        self.w_q, self.w_k, self.w_o = nn.Parameter(w_q), nn.Parameter(w_k), nn.Parameter(w_o)

    @classmethod
    def from_weights(
        cls, w_q: Tensor, w_k: Tensor, w_o: Tensor, *, hard: bool = False
    ) -> RankAttention:
        """A layer with the given weights (shapes (H, r, d), (H, r, d), (H, d, d))."""
        n_heads, d_qk, d_model = w_q.shape
        if w_k.shape != w_q.shape or w_o.shape != (n_heads, d_model, d_model):
            raise ConfigError(
                f"weights do not fit one layer: w_q {tuple(w_q.shape)}, w_k {tuple(w_k.shape)}, "
                f"w_o {tuple(w_o.shape)}; need (H, r, d), (H, r, d), (H, d, d)."
            )
        layer = cls(d_model, d_qk=d_qk, n_heads=n_heads, hard=hard, dtype=w_q.dtype)
        with torch.no_grad():
            layer.w_q.copy_(w_q), layer.w_k.copy_(w_k), layer.w_o.copy_(w_o)
        return layer

    def forward(self, queries: Tensor, x: Tensor) -> Tensor:
        """queries (..., q, d), x (..., n, d) -> (..., q, d)."""
        return rank_attention(queries, x, self.w_q, self.w_k, self.w_o, hard=self.hard).sum(-3)


class StackedRankAttention(nn.Module):
    """Many configurations (d_qk, n_heads, seed) of `RankAttention` as one module.

    Configurations with the same seed share a data stream (the seed draws the data too). Per
    stream, every head is scored through its bilinear form A_h = W_Q,h^T W_K,h (d x d; one
    batched product builds every head's, its r rows of W_Q,h and W_K,h padded by zero rows to
    d), and `stream_attention` computes every head at once:
    one product scores all heads, the softmax runs once, one batched product averages the
    points for all heads, and one product with [M_h]_h per configuration sums its heads; its
    backward is written out. So a step is a few large products, not thousands of tiny ones per
    head or rank. Each configuration computes what its own `RankAttention` (same seed)
    computes, up to float rounding, and the gradient of one configuration's loss never reaches
    another's parameters.

    Example:
        >>> stack = StackedRankAttention(4, d_qk=[1, 4], n_heads=[3, 1], seeds=[0, 0])
        >>> stack(torch.randn(1, 5, 1, 4), torch.randn(1, 5, 6, 4)).shape  # one stream: seed 0
        torch.Size([2, 5, 1, 4])
    """

    head_config: Tensor  # buffers (`register_buffer`): the configuration of each head,
    row_config: Tensor  # of each row of w_q and w_k,
    form_rows: Tensor  # where each row of w_q and w_k goes when every head is padded to d rows,
    config_stream: Tensor  # and the data stream of each configuration
    head_order: Tensor | None  # None when the streams list the configurations in order

    def __init__(
        self,
        d_model: int,
        *,
        d_qk: Sequence[int],
        n_heads: Sequence[int],
        seeds: Sequence[int],
        hard: bool = False,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if not len(d_qk) == len(n_heads) == len(seeds) >= 1:
            raise ConfigError(
                f"d_qk, n_heads and seeds must list the same configurations; got lengths "
                f"{len(d_qk)}, {len(n_heads)}, {len(seeds)}."
            )
        self.d_model, self.hard, self.n_configs = d_model, hard, len(d_qk)
        self.d_qk, self.n_heads, self.seeds = list(d_qk), list(n_heads), list(seeds)
        self.streams = sorted(set(seeds))  # data stream s belongs to seed streams[s]
        w_q, w_k, w_o, head_config, row_config, form_rows = [], [], [], [], [], []
        self.config_rows: dict[int, slice] = {}
        self.config_heads: dict[int, slice] = {}
        self.stream_heads: list[slice] = []  # the heads of each stream are contiguous
        self.stream_configs: list[tuple[list[int], list[int]]] = []  # configs, H d each
        rows = heads = 0
        for stream_seed in self.streams:
            first_head, configs = heads, [c for c in range(len(seeds)) if seeds[c] == stream_seed]
            for c in configs:
                q, k, o = init_rank_weights(
                    d_model, d_qk[c], n_heads[c], seed=seeds[c], dtype=dtype
                )
                w_q.append(q.flatten(0, 1))
                w_k.append(k.flatten(0, 1))
                w_o.append(o)
                self.config_rows[c] = slice(rows, rows + n_heads[c] * d_qk[c])
                self.config_heads[c] = slice(heads, heads + n_heads[c])
                head_config += [c] * n_heads[c]
                row_config += [c] * (n_heads[c] * d_qk[c])
                form_rows += [
                    (heads + h) * d_model + t for h in range(n_heads[c]) for t in range(d_qk[c])
                ]
                rows, heads = rows + n_heads[c] * d_qk[c], heads + n_heads[c]
            self.stream_heads.append(slice(first_head, heads))
            self.stream_configs.append((configs, [n_heads[c] * d_model for c in configs]))
        order = [c for configs, _ in self.stream_configs for c in configs]  # the streams' order
        where = [order.index(c) for c in range(len(seeds))]  # of each configuration's output
        self.register_buffer("head_order", None if where == sorted(where) else torch.tensor(where))
        self.w_q = nn.Parameter(torch.cat(w_q))  # (R, d): every head's query rows, R = sum H r
        self.w_k = nn.Parameter(torch.cat(w_k))  # (R, d)
        self.w_o = nn.Parameter(torch.cat(w_o))  # (K, d, d): M_h of every head
        self.register_buffer("head_config", torch.tensor(head_config))  # (K,)
        self.register_buffer("row_config", torch.tensor(row_config))  # (R,)
        self.register_buffer("form_rows", torch.tensor(form_rows))  # (R,)
        stream_of = {seed: i for i, seed in enumerate(self.streams)}
        self.register_buffer("config_stream", torch.tensor([stream_of[s] for s in seeds]))

    def config_weights(self, c: int) -> tuple[Tensor, Tensor, Tensor]:
        """Configuration c's own (w_q, w_k, w_o): shapes (H, r, d), (H, r, d), (H, d, d)."""
        shape = (self.n_heads[c], self.d_qk[c], self.d_model)
        rows, heads = self.config_rows[c], self.config_heads[c]
        w_q, w_k = self.w_q[rows].detach().reshape(shape), self.w_k[rows].detach().reshape(shape)
        return w_q, w_k, self.w_o[heads].detach()

    def per_config(self, per_stream: Tensor) -> Tensor:
        """(S, ...), one slice per data stream -> (C, ...), each configuration's stream's slice
        (a view, no copy, when there is one stream)."""
        if len(self.streams) == 1:
            return per_stream.expand(self.n_configs, *per_stream.shape[1:])
        return per_stream[self.config_stream]

    def forward(self, queries: Tensor, x: Tensor) -> Tensor:
        """queries (S, ..., q, d), x (S, ..., n, d), one slice per stream -> (C, ..., q, d)."""
        d, (n_queries, lead) = self.d_model, (queries.shape[-2], queries.shape[1:-2])
        padded_q, padded_k = (  # (K, d, d): head h's rows of w_q (w_k), then zero rows
            w.new_zeros(len(self.w_o) * d, d).index_copy(0, self.form_rows, w).view(-1, d, d)
            for w in (self.w_q, self.w_k)
        )
        forms = (padded_k.mT @ padded_q).flatten(0, 1).T  # (d, K d): column (h, e) of A_h
        maps = self.w_o.transpose(-1, -2).flatten(0, 1)  # (K d, d): row (h, e) is column e of M_h
        outputs = []  # (C_s, B, q, d) per stream, configurations in head order
        for s, heads in enumerate(self.stream_heads):
            y = queries[s].reshape(-1, n_queries, d)  # (B, q, d)
            keys = x[s].reshape(len(y), -1, d)  # (B, n, d)
            columns = slice(heads.start * d, heads.stop * d)
            sizes = self.stream_configs[s][1]
            outputs.append(
                stream_attention(y, keys, forms[:, columns], maps[columns], sizes, self.hard)
            )
        out = torch.cat(outputs) if len(outputs) > 1 else outputs[0]
        if self.head_order is not None:  # back to the configurations' own order
            out = out[self.head_order]
        return out.view(self.n_configs, *lead, n_queries, d)


def stream_attention(
    queries: Tensor, x: Tensor, forms: Tensor, maps: Tensor, sizes: Sequence[int], hard: bool
) -> Tensor:
    """The outputs of several configurations' heads on one batch, all heads at once.

    Formula: f_c(Y, X)_i = sum_{h in c} M_h z_{ih},  z_{ih} = sum_j a_{hij} x_j,
        a_{hij} = softmax_j(y_i^T A_h x_j) (one-hot on the argmax if `hard`),
        A_h = W_Q,h^T W_K,h the head's bilinear form.

    Args:
        queries: y, shape (B, q, d). x: the points, (B, n, d).
        forms: [A_h]_h side by side, (d, H d): column h d + e is column e of A_h.
        maps: [M_h^T]_h stacked, (H d, d): row h d + e is column e of M_h.
        sizes: H_c d of each configuration, in head order (they sum to H d).
        hard: hardmax weights (no gradient reaches the forms through the argmax).

    Returns:
        (C, B, q, d): the output of each configuration.
    """
    return _StreamAttention.apply(queries, x, forms, maps, tuple(sizes), hard)


CHUNK = 2**17  # elements of u per slice of the batch: the slice's products stay in cache


def _parts(n_samples: int, row: int) -> list[slice]:
    """Equal slices of the batch whose (q H d)-sized rows fill at most about `CHUNK` elements."""
    n_parts = max(1, math.ceil(n_samples * row / CHUNK))
    step = max(1, math.ceil(n_samples / n_parts))
    return [slice(i, i + step) for i in range(0, n_samples, step)]


class _StreamAttention(torch.autograd.Function):
    """`stream_attention` with a written-out backward, which keeps the memory of a step small.

    Scores and weights are kept keys first, (B, n, q H): the softmax runs over keys along
    whole rows of (query, head) pairs, and every batched product has the q H axis as its long
    side (torch's batched products are several times slower when their result has only n = 8
    columns; measured on CPU). Scores run slice by slice of the batch (`_parts`), so u and
    the scores of a slice stay in cache. The weights are saved, and z is kept for the first
    backward (the maps' gradient needs it; computing it again cost 1-3 % of a grid step), which
    then writes z's own gradient where z was, so keeping it adds nothing to the backward's
    peak memory; a second backward of the same graph (retain_graph) computes z again.
    Softmax backward: dL/ds = a * (dL/da - sum_j a dL/da).
    """

    @staticmethod
    def forward(ctx, queries, x, forms, maps, sizes, hard):
        (b, q, d), n, width = queries.shape, x.shape[-2], forms.shape[1]
        weights = x.new_empty(b, n, q * width // d)  # (B, n, q H): a_{hij}
        z = x.new_empty(b, q * width // d, d)  # (B, q H, d): z_{ih}
        for part in _parts(b, q * width):
            u = (queries[part] @ forms).view(-1, q * width // d, d)  # u_{ih} = A_h y_i
            scores = x[part] @ u.transpose(-1, -2)  # (b, n, q H)
            if hard:  # one-hot on the first best key, as `hardmax`
                weights[part] = hardmax(scores.transpose(-1, -2)).transpose(-1, -2)
            else:
                torch.softmax(scores, dim=-2, out=weights[part])
            torch.bmm(weights[part].transpose(-1, -2), x[part], out=z[part])
        z = z.view(b * q, -1)  # (B q, H d)
        out = z.new_empty(len(sizes), b * q, d)
        for k, (z_c, m_c) in enumerate(zip(z.split(sizes, -1), maps.split(sizes), strict=True)):
            torch.mm(z_c, m_c, out=out[k])
        ctx.save_for_backward(queries, x, forms, maps, weights)
        ctx.sizes, ctx.hard, ctx.z = sizes, hard, z  # z: overwritten by the first backward
        return out.view(len(sizes), b, q, d)

    @staticmethod
    def backward(ctx, grad):
        queries, x, forms, maps, weights = ctx.saved_tensors
        (b, q, d), sizes, width = queries.shape, ctx.sizes, forms.shape[1]
        grad = grad.reshape(len(sizes), b * q, d)
        z, ctx.z = ctx.z, None  # (B q, H d), the forward's, or computed again
        if z is None:
            z = (weights.transpose(-1, -2) @ x).view(b * q, -1)
        grad_maps = torch.empty_like(maps)
        parts = zip(
            grad, maps.split(sizes), z.split(sizes, -1), grad_maps.split(sizes), strict=True
        )
        for g, m_c, z_c, grad_m in parts:  # z_c read, then overwritten by its own gradient
            torch.mm(z_c.T, g, out=grad_m)
            torch.mm(g, m_c.T, out=z_c)
        grad_z = z.view(b, -1, d)  # (B, q H, d): every product below writes where z was
        need_queries, need_x, need_forms = ctx.needs_input_grad[:3]
        grad_x = weights @ grad_z if need_x else None
        if ctx.hard:  # the argmax passes no gradient to the scores
            return None, grad_x, None, grad_maps, None, None
        grad_queries = torch.empty_like(queries)
        for part in _parts(b, q * width):
            grad_s = x[part] @ grad_z[part].transpose(-1, -2)  # (b, n, q H): dL/da
            grad_s.mul_(weights[part])
            grad_s.addcmul_(weights[part], grad_s.sum(-2, keepdim=True), value=-1)  # dL/ds
            grad_u = torch.bmm(grad_s.transpose(-1, -2), x[part], out=grad_z[part])
            if need_queries:
                grad_queries[part] = grad_u.view(-1, q, width) @ forms.T
            if grad_x is not None:
                grad_x[part] += grad_s @ (queries[part] @ forms).view(-1, q * width // d, d)
        # dL/dA_h = sum_i y_i (dL/du_ih)^T, one product over every part's dL/du (now in grad_z)
        grad_forms = queries.reshape(-1, d).T @ grad_z.view(-1, width) if need_forms else None
        return (
            grad_queries if need_queries else None,
            grad_x,
            grad_forms,
            grad_maps,
            None,
            None,
        )
