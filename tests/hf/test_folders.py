"""Model folders as users save them pass the checks: a model with a task head (its base under a
prefix, no pooler), weights in shards, the shipped MiniLM; and the checks name what is wrong."""

from __future__ import annotations

import json

import pytest
from fifos import fifo
from transformers import BertConfig, BertForMaskedLM

from rankcollapse.errors import InputError
from rankcollapse.hf import load_model
from rankcollapse.hf.folders import check_model_folder, read_model_config
from rankcollapse.hf.models import _minilm_path

TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 64, "vocab_size": 64}  # fmt: skip


def test_a_model_with_a_head_saved_in_shards_passes_and_loads(tmp_path):
    BertForMaskedLM(BertConfig(**TINY)).save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    check_model_folder(tmp_path)
    assert load_model(str(tmp_path)).n_layers == 2


def test_the_shipped_minilm_folder_passes():
    check_model_folder(_minilm_path())
    assert read_model_config(_minilm_path()).num_hidden_layers == 6


def test_a_shard_index_naming_a_path_outside_the_folder_is_refused(tmp_path):
    BertForMaskedLM(BertConfig(**TINY)).save_pretrained(tmp_path, max_shard_size="20KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    first = next(iter(index["weight_map"]))
    index["weight_map"][first] = "../elsewhere.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(InputError, match="without a weight_map of shard file names"):
        check_model_folder(tmp_path)


def test_a_config_with_more_layers_than_the_weights_is_refused_naming_the_tensors(tmp_path):
    BertForMaskedLM(BertConfig(**TINY)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    with pytest.raises(InputError, match=r"without 16 of the \d+ tensors .* 'encoder.layer.2"):
        check_model_folder(tmp_path)


def test_a_config_with_fewer_layers_than_the_weights_is_refused_naming_a_tensor(tmp_path):
    BertForMaskedLM(BertConfig(**TINY)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    with pytest.raises(InputError, match=r"tensor 'bert.encoder.layer.1.* has no place for"):
        check_model_folder(tmp_path)


def test_a_tokenizer_json_above_the_config_bound_passes(tmp_path):
    """A large vocabulary's tokenizer.json is tens of MB (52 MB is seen): it has its own bound,
    above the 32 MiB of a config."""
    from rankcollapse.hf.folders import MAX_JSON_BYTES, MAX_TOKENIZER_BYTES

    BertForMaskedLM(BertConfig(**TINY)).save_pretrained(tmp_path)
    merges = ["a" * 1000] * (MAX_JSON_BYTES // 1000 + 1)
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"merges": merges}}))
    assert MAX_JSON_BYTES < (tmp_path / "tokenizer.json").stat().st_size < MAX_TOKENIZER_BYTES
    check_model_folder(tmp_path)


def test_a_fifo_in_a_model_folder_is_refused_unopened(tmp_path):
    BertForMaskedLM(BertConfig(**TINY)).save_pretrained(tmp_path)
    fifo(tmp_path / "vocab.txt")  # transformers would open it and wait for a writer
    with pytest.raises(InputError, match=r"holds vocab.txt, a named pipe \(FIFO\), not a file"):
        check_model_folder(tmp_path)
