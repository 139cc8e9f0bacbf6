"""Per-head query-key ranks of real models: the rank r of Amsel, Yehudai, Bruna 2024.

For layer l and query head h, the attention score is <W_Q,h x_i, W_K,h x_j> / sqrt(d_head) =
x_i^T (W_Q,h^T W_K,h) x_j / sqrt(d_head): the bilinear form W_Q,h^T W_K,h (d x d) has rank at
most d_head. We report its numerical, stable and effective rank (`rankcollapse.metrics`).

- Its singular values equal those of the d_head x d_head core R_Q R_K^T, where W_Q,h^T = Q_Q R_Q
  and W_K,h^T = Q_K R_K (thin QR), so the metrics run on the small core in float64.
- Grouped key-value heads (Llama, SmolLM2): query head h uses key head h // (H / H_kv).
- Biases of the projections (BERT) add terms linear in x_i or x_j, not to the bilinear form.
- RoPE (Llama) rotates queries and keys by position: the score at offset i - j is
  x_i^T W_Q^T R_{j-i} W_K x_j, and the orthogonal R_{j-i} does not change the rank of the
  product at a fixed offset; the ranks below are of W_Q^T W_K (offset 0).
- The numerical rank counts singular values above `rtol` x the largest; by default rtol is the
  floor of the weights' dtype (float32, or the dequantised 4-bit SmolLM2 weights).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from rankcollapse.devices import resolve_dtype
from rankcollapse.errors import ConfigError
from rankcollapse.hf.architectures import Architecture, block_list, head_sizes, submodule
from rankcollapse.hf.models import LoadedModel, as_loaded
from rankcollapse.metrics import dtype_floor, effective_rank, numerical_rank, stable_rank

QK_METRICS = ("numerical_rank", "stable_rank", "effective_rank")


def _projection(attention: torch.nn.Module, path: str, arch: Architecture) -> Tensor:
    """A projection's weight as (out, in): rows are output features."""
    if arch.projection == "einsum":  # XLNet: nn.Parameter (d, H, d_head), einsum("ibh,hnd->ibnd")
        return getattr(attention, path).permute(1, 2, 0).flatten(0, 1)
    # a Linear or GPT-2's Conv1D: transformers is untyped, torch types its weight Tensor | Module
    projection: Any = submodule(attention, path)
    weight: Tensor = projection.weight
    return weight.T if arch.projection == "conv1d" else weight  # GPT-2's Conv1D: x @ weight


def _split_fused(w: Tensor, arch: Architecture, n_heads: int, n_kv: int, d_head: int):
    """W_Q and W_K (rows) out of a fused q/k/v projection."""
    if arch.fused_qkv == "per_head":  # GPT-NeoX: per head [q_h; k_h; v_h]
        per_head = w.reshape(n_heads, 3, d_head, -1)
        return per_head[:, 0].flatten(0, 1), per_head[:, 1].flatten(0, 1)
    q_rows, k_rows = n_heads * d_head, n_kv * d_head  # Phi-3, GPT-2: [q; k; v]
    return w[:q_rows], w[q_rows : q_rows + k_rows]


def qk_heads(loaded: LoadedModel) -> list[tuple[Tensor, Tensor, Tensor]]:
    """Per distinct block: (W_Q (H, d_head, d), W_K per query head (H, d_head, d), kv_head (H,)).

    Key-value heads are numbered from 0 here (tensor indices); `qk_ranks` reports from 1.

    Example:
        >>> from transformers import LlamaConfig, LlamaModel
        >>> from rankcollapse.hf.models import wrap_model
        >>> cfg = LlamaConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=4,
        ...                   num_key_value_heads=2, intermediate_size=8, vocab_size=10)
        >>> w_q, w_k, kv = qk_heads(wrap_model(LlamaModel(cfg), name="tiny"))[0]
        >>> w_q.shape, kv.tolist()
        (torch.Size([4, 4, 16]), [0, 0, 1, 1])
    """
    arch = loaded.arch
    n_heads, n_kv, d_head = head_sizes(loaded.model.config)
    heads = []
    for block in block_list(loaded.model, arch):
        attention = submodule(block, arch.attention)
        w_q = _projection(attention, arch.q, arch).detach()
        w_k = _projection(attention, arch.k, arch).detach()
        if arch.fused_qkv:
            w_q, w_k = _split_fused(w_q, arch, n_heads, n_kv, d_head)
        w_q = w_q.reshape(n_heads, d_head, -1)
        kv_head = torch.arange(n_heads) // (n_heads // n_kv)
        w_k = w_k.reshape(n_kv, d_head, -1)[kv_head]
        heads.append((w_q, w_k, kv_head))
    return heads


def qk_core(w_q: Tensor, w_k: Tensor) -> Tensor:
    """R_Q R_K^T (..., r, r): the same singular values as W_Q^T W_K (..., d, d), far smaller.

    Example:
        >>> w_q, w_k = torch.randn(3, 2, 5, dtype=torch.float64), torch.randn(3, 2, 5, dtype=torch.float64)
        >>> big = torch.linalg.svdvals(w_q.transpose(-1, -2) @ w_k)[..., :2]
        >>> torch.allclose(torch.linalg.svdvals(qk_core(w_q, w_k)), big)
        True
    """
    r_q = torch.linalg.qr(w_q.transpose(-1, -2).double()).R  # (..., r, r)
    r_k = torch.linalg.qr(w_k.transpose(-1, -2).double()).R
    return r_q @ r_k.transpose(-1, -2)


def qk_ranks(
    model: str | LoadedModel | nn.Module,
    *,
    init: str = "pretrained",
    rtol: float | None = None,
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = "float32",
) -> pd.DataFrame:
    """Numerical, stable and effective rank of W_Q,h^T W_K,h for every layer and query head.

    Layers and heads are numbered from 1 (layer l is block l, as in `probe`, whose layer 0 is
    the embedding output).

    Args:
        model: a model name or local directory (loaded offline), a `LoadedModel`, or a Hugging
            Face model in memory (read only, never copied).
        init: "pretrained" or "random" when `model` is a name.
        rtol: numerical-rank threshold relative to the largest singular value; default the
            floor of the weights' dtype.
        device, dtype: where and in which dtype a model given by name is loaded.

    Returns:
        tidy rows: model, init, layer, head, kv_head, d_head, metric, value.

    Example:
        >>> from transformers import GPTNeoXConfig, GPTNeoXModel
        >>> cfg = GPTNeoXConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        ...                     intermediate_size=8, vocab_size=10)
        >>> df = qk_ranks(GPTNeoXModel(cfg))
        >>> df[df.metric == "numerical_rank"][["layer", "head", "value"]].values.tolist()
        [[1.0, 1.0, 8.0], [1.0, 2.0, 8.0]]
    """
    loaded = as_loaded(model, init=init, device=device, dtype=resolve_dtype(dtype))
    if rtol is not None and not 0 < rtol < 1:
        raise ConfigError(f"rtol={rtol}; pass a relative threshold in (0, 1).")
    rows = []
    for layer, (w_q, w_k, kv_head) in enumerate(qk_heads(loaded), start=1):
        w_q, w_k = w_q.cpu(), w_k.cpu()
        core = qk_core(w_q, w_k)  # (H, d_head, d_head)
        values = {
            "numerical_rank": numerical_rank(core, rtol=rtol or dtype_floor(w_q.dtype)),
            "stable_rank": stable_rank(core),
            "effective_rank": effective_rank(core),
        }
        for metric, per_head in values.items():
            for head, value in enumerate(per_head.tolist()):
                rows.append(
                    (
                        loaded.name,
                        loaded.init,
                        layer,
                        head + 1,
                        int(kv_head[head]) + 1,
                        w_q.shape[1],
                        metric,
                        value,
                    )
                )
    columns = ["model", "init", "layer", "head", "kv_head", "d_head", "metric", "value"]
    return pd.DataFrame(rows, columns=columns)
