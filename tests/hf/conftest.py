"""Tiny random models (2 layers, 32 wide) of every supported architecture, in eval mode."""

import pytest
import torch

from rankcollapse.hf import wrap_model

VOCAB = 60


def tiny_model(arch: str, attn_implementation: str = "eager"):
    from transformers import (
        AlbertConfig,
        AlbertModel,
        BertConfig,
        BertModel,
        GPT2Config,
        GPT2Model,
        LlamaConfig,
        LlamaModel,
        XLNetConfig,
        XLNetModel,
    )

    configs = {
        "bert": (
            BertModel,
            BertConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                vocab_size=VOCAB,
            ),
        ),
        "albert": (
            AlbertModel,
            AlbertConfig(
                hidden_size=32,
                embedding_size=16,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                vocab_size=VOCAB,
            ),
        ),
        "xlnet": (
            XLNetModel,
            XLNetConfig(d_model=32, n_layer=2, n_head=2, d_inner=64, vocab_size=VOCAB),
        ),
        "gpt2": (
            GPT2Model,
            GPT2Config(
                n_embd=32, n_layer=2, n_head=2, vocab_size=VOCAB, bos_token_id=0, eos_token_id=0
            ),
        ),
        "llama": (
            LlamaModel,
            LlamaConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                intermediate_size=64,
                vocab_size=VOCAB,
                bos_token_id=0,
                eos_token_id=0,
                pad_token_id=0,
            ),
        ),
    }
    cls, config = configs[arch]
    config._attn_implementation = attn_implementation
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = cls(config).eval()
    return wrap_model(model, name=f"tiny-{arch}")


ARCHS = ["bert", "albert", "xlnet", "gpt2", "llama"]


@pytest.fixture(params=ARCHS)
def tiny(request):
    return tiny_model(request.param)


@pytest.fixture
def ids():
    return torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))


@pytest.fixture
def make_tiny():
    """tiny_model(arch, attn_implementation="eager") as a fixture (test dirs are not packages)."""
    return tiny_model
