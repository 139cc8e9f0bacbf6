"""Tiny random models (2 layers, 32 wide) of the first five families, in eval mode."""

import pytest
import torch

from rankcollapse.hf import wrap_model
from rankcollapse.hf.registry import VOCAB, tiny_config


def tiny_model(arch: str, attn_implementation: str = "eager"):
    """`rankcollapse.hf.models.tiny_model`'s model of `arch` with the attention implementation asked for."""
    import transformers

    config = tiny_config(arch)
    config._attn_implementation = attn_implementation
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.AutoModel.from_config(config).eval()
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
