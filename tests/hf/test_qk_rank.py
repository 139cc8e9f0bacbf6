"""Per-head query-key ranks: hand-built weights of known rank, grouped key-value heads,
every adapter, and the shipped MiniLM (slow)."""

from __future__ import annotations

import math

import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.hf.qk_rank import qk_core, qk_heads, qk_ranks


def _values(df, metric):
    return df[df.metric == metric].sort_values(["layer", "head"]).value.tolist()


def test_hand_built_bert_heads_have_the_ranks_they_were_given(make_tiny):
    loaded = make_tiny("bert")  # 2 layers, 32 wide, 4 heads of 8
    attention = loaded.model.encoder.layer[0].attention.self
    with torch.no_grad():
        for proj in (attention.query, attention.key):
            proj.weight[:16].zero_()  # heads 1 and 2 (numbered from 1)
        attention.query.weight[0, 0], attention.query.weight[1, 1] = 2.0, 1.0  # head 1
        attention.key.weight[0, 0], attention.key.weight[1, 1] = 1.0, 1.0  # W_Q^T W_K = diag(2, 1)
        attention.query.weight[8, 5] = attention.key.weight[8, 7] = 3.0  # head 2: rank 1
    df = qk_ranks(loaded)
    layer1 = df[df.layer == 1]
    assert _values(layer1, "numerical_rank") == [2.0, 1.0, 8.0, 8.0]
    assert _values(layer1, "stable_rank")[:2] == pytest.approx([(4 + 1) / 4, 1.0])
    entropy = -(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3)
    assert _values(layer1, "effective_rank")[:2] == pytest.approx([math.exp(entropy), 1.0])
    assert _values(df[df.layer == 2], "numerical_rank") == [8.0] * 4  # random init: full


def test_llama_query_heads_use_their_grouped_key_head(make_tiny):
    loaded = make_tiny("llama")  # 4 query heads, 2 key-value heads of 8
    with torch.no_grad():
        loaded.model.layers[0].self_attn.k_proj.weight[8:12] = 0.0  # key head 1: rank 4
    _, w_k, kv_head = qk_heads(loaded)[0]
    assert kv_head.tolist() == [0, 0, 1, 1]
    assert torch.equal(w_k[2], w_k[3])
    df = qk_ranks(loaded)
    assert _values(df[df.layer == 1], "numerical_rank") == [8.0, 8.0, 4.0, 4.0]
    assert set(df.kv_head[df.layer == 1]) == {1, 2}  # numbered from 1, as heads and layers


def test_the_small_core_has_the_spectrum_of_the_full_product():
    g = torch.Generator().manual_seed(0)
    w_q, w_k = torch.randn(3, 4, 10, generator=g), torch.randn(3, 4, 10, generator=g)
    full = torch.linalg.svdvals(w_q.double().transpose(-1, -2) @ w_k.double())
    assert torch.allclose(torch.linalg.svdvals(qk_core(w_q, w_k)), full[:, :4], atol=1e-10)
    assert full[:, 4:].max() < 1e-12


def test_bad_rtol_gets_a_clear_error(make_tiny):
    with pytest.raises(ConfigError, match=r"rtol=2.0.*\(0, 1\)"):
        qk_ranks(make_tiny("bert"), rtol=2.0)


@pytest.mark.slow
def test_pretrained_minilm_heads_are_full_rank_and_the_cli_writes_a_heat_map(tmp_path):
    from rankcollapse.cli import main

    df = qk_ranks("minilm")
    assert len(df) == 6 * 12 * 3 and set(df.d_head) == {32}
    assert set(_values(df, "numerical_rank")) == {32.0}
    assert main(["qk-rank", "minilm", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "qk_ranks.csv").exists() and (tmp_path / "qk_stable_rank.svg").exists()
