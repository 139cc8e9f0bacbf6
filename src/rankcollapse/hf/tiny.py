"""Tiny random-init models of every registered family, for tests, examples and smoke runs.

`tiny_config(family)` is a config of the library's own class at 2 layers, width 32 and 4 heads
(2 key-value heads where the family has grouped-query attention), with its special token ids
inside a 64-id vocabulary; `tiny_model(family)` builds it, seeded, in eval mode. Every family
of `ARCHITECTURES` has one (a test checks), so a new adapter gets the conformance tests for free.

Example:
    >>> tiny_model("qwen3").config.num_hidden_layers
    2
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rankcollapse.errors import unknown_name
from rankcollapse.hf.architectures import ARCHITECTURES

VOCAB = 64
_COMMON = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "vocab_size": VOCAB,
}
# Decoders: grouped-query attention and token ids inside the small vocabulary (Phi-3's and
# GPT-2's defaults point outside it).
_DECODER = {
    **_COMMON,
    "num_key_value_heads": 2,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "max_position_embeddings": 128,
}


def _configs() -> dict[str, Any]:
    import transformers as tf

    return {
        "llama": lambda: tf.LlamaConfig(**_DECODER),
        "mistral": lambda: tf.MistralConfig(**_DECODER),
        "qwen2": lambda: tf.Qwen2Config(**_DECODER),
        "qwen3": lambda: tf.Qwen3Config(**_DECODER, head_dim=8),
        "gemma": lambda: tf.GemmaConfig(**_DECODER, head_dim=8),
        "gemma2": lambda: tf.Gemma2Config(
            **_DECODER, head_dim=8, query_pre_attn_scalar=8, sliding_window=4
        ),
        "phi3": lambda: tf.Phi3Config(**_DECODER),
        "olmo2": lambda: tf.Olmo2Config(**_DECODER),
        "gpt2": lambda: tf.GPT2Config(
            n_embd=32,
            n_layer=2,
            n_head=4,
            vocab_size=VOCAB,
            n_positions=128,
            bos_token_id=1,
            eos_token_id=2,
        ),
        "gpt_neox": lambda: tf.GPTNeoXConfig(
            **_COMMON, bos_token_id=1, eos_token_id=2, max_position_embeddings=128
        ),
        "gpt_neox-sequential": lambda: tf.GPTNeoXConfig(
            **_COMMON,
            bos_token_id=1,
            eos_token_id=2,
            max_position_embeddings=128,
            use_parallel_residual=False,
        ),
        "opt": lambda: tf.OPTConfig(**_opt()),
        "opt-post": lambda: tf.OPTConfig(**_opt(), do_layer_norm_before=False),
        "bert": lambda: tf.BertConfig(**_COMMON),
        "roberta": lambda: tf.RobertaConfig(**_COMMON, pad_token_id=1),
        "xlm-roberta": lambda: tf.XLMRobertaConfig(**_COMMON, pad_token_id=1),
        "electra": lambda: tf.ElectraConfig(**_COMMON, embedding_size=16),
        "distilbert": lambda: tf.DistilBertConfig(
            dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=VOCAB
        ),
        "albert": lambda: tf.AlbertConfig(**_COMMON, embedding_size=16),
        "xlnet": lambda: tf.XLNetConfig(
            d_model=32, n_layer=2, n_head=4, d_inner=64, vocab_size=VOCAB
        ),
        # DeBERTa-v3's attention: disentangled, content-to-position and position-to-content.
        "deberta-v2": lambda: tf.DebertaV2Config(
            **_COMMON,
            relative_attention=True,
            pos_att_type=["p2c", "c2p"],
            position_biased_input=False,
            max_relative_positions=16,
        ),
        "t5": lambda: tf.T5Config(
            d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=VOCAB
        ),
        "vit": lambda: tf.ViTConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            image_size=16,
            patch_size=4,
        ),
    }


def _opt() -> dict[str, Any]:
    return {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "ffn_dim": 64,
        "vocab_size": VOCAB,
        "word_embed_proj_dim": 32,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "max_position_embeddings": 128,
    }


def tiny_config(family: str) -> Any:
    """A 2-layer, 32-wide config of `family` (a name of `ARCHITECTURES`)."""
    configs = _configs()
    if family not in configs:
        raise unknown_name("family", family, ARCHITECTURES)
    return configs[family]()


def tiny_model(family: str, *, seed: int = 0, dtype: torch.dtype = torch.float32) -> nn.Module:
    """The tiny model of `family`, seeded, in eval mode (the class that holds its blocks)."""
    import transformers

    config = tiny_config(family)
    model_class = ARCHITECTURES[family].model_class
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if model_class:
            model = getattr(transformers, model_class)(config)
        else:
            model = transformers.AutoModel.from_config(config)
    return model.to(dtype).eval()
