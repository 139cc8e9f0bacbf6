"""A custom attention function for Hugging Face models: replace the mask, rescale the
temperature, record the probabilities, without touching the library's model code.

It is registered once, on first use, under the name `ATTENTION_NAME` with
`transformers.AttentionInterface` (not at import: that would load transformers' model code),
and the library's eager (additive float) mask builder is registered under the same name with
`AttentionMaskInterface`. The second registration matters: for a custom name, causal models
(GPT-2, Llama) would otherwise pass `attention_mask=None` and rely on the module's `is_causal`
flag, silently turning a decoder bidirectional (a test checks every adapter against the library's own attention). With it, the model passes an
explicit (b, 1, n, n) mask and this function reproduces eager attention exactly.

What the function does is read from `AttentionSettings`, installed for the duration of a
`with attention_settings(...)` block (a context variable, so nothing leaks between runs).
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.masks import bias_of

ATTENTION_NAME = "rankcollapse"


@dataclass(frozen=True)
class AttentionSettings:
    """What the custom attention changes.

    Attributes:
        mask: boolean (n, n), True where query i may attend to key j; replaces the model's own
            pattern (causal or complete) in every layer. None keeps the model's pattern.
        token_mask: boolean (b, n), True for real tokens; with `mask`, pads are never attended
            to (a pad query attends to itself so its row stays defined; pads never enter metrics).
        temperature: the softmax temperature T: the model's own logits (after its scaling,
            T5's relative position bias and Gemma 2's soft-capping) are divided by T (T < 1
            sharper, T > 1 flatter). Without a bias or soft-cap, in Wu et al.'s terms,
            d_QK' = T^2 d_head.
        record: called as record(module, probs) with the (b, h, n, n) probabilities of every
            attention call (before dropout), e.g. to stream attention metrics.
    """

    mask: Tensor | None = None
    token_mask: Tensor | None = None
    temperature: float = 1.0
    record: Callable[[nn.Module, Tensor], None] | None = None

    def bias(self, n_queries: int, n_keys: int, dtype: torch.dtype) -> Tensor | None:
        """Additive (b or 1, 1, n, n) bias of `mask`: 0 where allowed, the dtype's minimum
        elsewhere; None without a mask (the model's own pattern)."""
        if self.mask is None:
            return None
        allowed = self.mask[:n_queries, :n_keys]  # (n, n)
        if self.token_mask is not None:
            keys = self.token_mask[:, None, None, :n_keys]  # (b, 1, 1, n)
            own = torch.eye(n_queries, n_keys, dtype=torch.bool, device=allowed.device)
            allowed = allowed & (keys | own)  # (b, 1, n, n)
        else:
            allowed = allowed[None, None]
        return bias_of(allowed, dtype, finite=True)


_SETTINGS: contextvars.ContextVar[AttentionSettings | None] = contextvars.ContextVar(
    "rankcollapse_attention", default=None
)


def _repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """Grouped-query attention: repeat each key/value head n_rep times (b, h_kv, n, d)."""
    if n_rep == 1:
        return x
    b, h, n, d = x.shape
    return x[:, :, None].expand(b, h, n_rep, n, d).reshape(b, h * n_rep, n, d)


def custom_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    position_bias: Tensor | None = None,
    softcap: float | None = None,
    **kwargs,
) -> tuple[Tensor, Tensor]:
    """Eager attention with the active `AttentionSettings` applied.

    query, key, value: (b, h, n, d_head) (key/value may have fewer heads: grouped-query).
    position_bias: T5's relative position bias, added to the scores (b or 1, h, n, n).
    softcap: Gemma 2's logit soft-capping, logits = softcap * tanh(scores / softcap).
    Returns the output (b, n, h, d_head) and the probabilities (b, h, n, n).
    """
    settings = _SETTINGS.get() or AttentionSettings()
    n_rep = query.shape[1] // key.shape[1]
    key, value = _repeat_kv(key, n_rep), _repeat_kv(value, n_rep)
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling  # (b, h, n, n)
    if position_bias is not None:
        scores = scores + position_bias
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if settings.temperature != 1.0:
        scores = scores / settings.temperature
    bias = settings.bias(scores.shape[-2], scores.shape[-1], scores.dtype)
    if bias is not None:
        scores = scores + bias
    elif attention_mask is not None:
        scores = scores + attention_mask[:, :, :, : key.shape[-2]]
    # Softmax in at least float32, as the library's Llama does; float64 models stay float64.
    probs = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32))
    probs = probs.to(value.dtype)
    if settings.record is not None:
        settings.record(module, probs)
    probs = nn.functional.dropout(probs, p=dropout, training=module.training)
    out = torch.matmul(probs, value).transpose(1, 2).contiguous()  # (b, n, h, d_head)
    return out, probs


@functools.cache
def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(ATTENTION_NAME, custom_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)


@contextmanager
def attention_settings(model: nn.Module, settings: AttentionSettings) -> Iterator[None]:
    """Switch `model` to the custom attention with `settings`; restore its own afterwards."""
    _register()
    hf_model: Any = model  # a transformers model (torch types its config and methods as Module)
    previous = hf_model.config._attn_implementation
    token = _SETTINGS.set(settings)
    hf_model.set_attn_implementation(ATTENTION_NAME)
    try:
        yield
    finally:
        hf_model.set_attn_implementation(previous)
        _SETTINGS.reset(token)
