"""Models in memory, directories without a tokenizer, structural detection, dtypes, devices."""

import pytest
import torch

from rankcollapse.devices import resolve_device, resolve_dtype
from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf import RunSettings, load_model, run_batch, wrap_model
from rankcollapse.hf.models import tiny_model
from rankcollapse.hf.registry import VOCAB, tiny_config
from rankcollapse.measure import probe


def _hooks(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Tiny BERT and Llama directories saved without tokenizer files."""
    root = tmp_path_factory.mktemp("saved")
    for family in ("bert", "llama"):
        tiny_model(family).save_pretrained(root / family)
    return root


def test_model_with_a_head_in_memory_is_probed_without_a_copy_and_left_as_it_was():
    import transformers as tf

    model = tf.LlamaForCausalLM(tiny_config("llama")).eval()
    hooks, implementation = _hooks(model), model.config._attn_implementation
    df = probe(model, variants=["san", "transformer"], mask="window:1", random_tokens=True,
               n_samples=2, n_tokens=8, metrics=["res_comp_rel"])  # fmt: skip
    assert df.layer.max() == 2 and set(df.variant) == {"san", "transformer"}
    assert wrap_model(model).model is model.model  # the same modules, not a copy
    assert _hooks(model) == hooks and model.config._attn_implementation == implementation
    assert not model.training


def test_hooks_and_attention_implementation_are_restored_after_an_error():
    model = tiny_model("bert")
    loaded = wrap_model(model)
    hooks, implementation = _hooks(model), model.config._attn_implementation

    def fail(capture):
        if capture.layer == 1:
            raise RuntimeError("callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        settings = RunSettings("san", torch.eye(5, dtype=torch.bool), train_mode=True)
        run_batch(loaded, torch.ones(1, 5, dtype=torch.long), on_layer=fail, settings=settings)
    assert _hooks(model) == hooks and model.config._attn_implementation == implementation
    assert not model.training


def test_directory_without_tokenizer_takes_random_ids_from_its_config_vocabulary(saved):
    df = probe(str(saved / "llama"), random_tokens=True, n_samples=2, n_tokens=6,
               metrics=["res_comp_rel"])  # fmt: skip
    assert df.layer.max() == 2 and df.value.notna().all()
    loaded = load_model(str(saved / "bert"))
    assert loaded.tokenizer is None


def test_a_directory_given_as_a_path_is_named_by_its_text_in_the_rows(saved):
    # the loader's name was the Path itself, so the model column held PosixPath objects
    df = probe(saved / "llama", random_tokens=True, n_samples=2, n_tokens=6,
               metrics=["res_comp_rel"])  # fmt: skip
    assert set(map(type, df.model)) == {str} and set(df.model) == {str(saved / "llama")}


def test_text_without_tokenizer_says_to_pass_random_tokens_or_a_tokenizer(saved):
    with pytest.raises(InputError, match="no tokenizer.*random_tokens=True.*tokenizer=DIR"):
        probe(str(saved / "bert"), n_samples=2, n_tokens=6)


def test_a_tokenizer_directory_supplies_the_missing_tokenizer(saved, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[UNK]", *sorted(set(sample_words()))][: VOCAB - 1]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]").save_pretrained(tmp_path)
    loaded = load_model(str(saved / "bert"), tokenizer=tmp_path)
    df = probe(loaded, n_samples=2, n_tokens=8, metrics=["res_comp_rel"])
    assert df.layer.max() == 2


def sample_words():
    from rankcollapse.hf import sample_corpus

    return sample_corpus().split()[:200]


def test_tokenizer_larger_than_the_embedding_is_refused(saved):
    from rankcollapse.hf.models import _minilm_tokenizer

    loaded = load_model(str(saved / "bert"))
    loaded.tokenizer = _minilm_tokenizer()  # 30522 ids for an embedding of 64
    with pytest.raises(InputError, match="token ids from .* but .* a vocabulary of 64"):
        probe(loaded, n_samples=2, n_tokens=8, metrics=["res_comp_rel"])
    with pytest.raises(InputError, match="has 30522 ids but the model's embedding has 64 rows"):
        probe(loaded, random_tokens=True, n_samples=2, n_tokens=8, metrics=["res_comp_rel"])


def test_unknown_model_type_with_llama_blocks_gets_the_llama_adapter_and_says_so():
    model = tiny_model("llama")
    model.config.model_type = "my-llama"
    loaded = wrap_model(model)
    assert loaded.arch.name == "llama"
    assert "inferred" in loaded.info["adapter"] and "my-llama" in loaded.info["adapter"]


def test_bfloat16_model_gives_float64_metrics_flagged_at_its_own_floor():
    df32 = probe(wrap_model(tiny_model("llama")), random_tokens=True, n_samples=2, n_tokens=8,
                 metrics=["res_comp_rel"])  # fmt: skip
    bf16 = wrap_model(tiny_model("llama", dtype=torch.bfloat16))
    df16 = probe(bf16, random_tokens=True, n_samples=2, n_tokens=8, metrics=["res_comp_rel"])
    assert df16.value.dtype == "float64" and bf16.info["dtype"] == "bfloat16"
    assert df16.value.to_numpy() == pytest.approx(df32.value.to_numpy(), rel=0.05)


def test_named_random_model_loads_in_the_asked_dtype_and_device():
    loaded = load_model("gpt2", init="random", dtype=torch.bfloat16, device="auto",
                        config_overrides={"n_layer": 1})  # fmt: skip
    assert loaded.dtype == torch.bfloat16 and loaded.device == resolve_device("auto")


def test_devices_and_dtypes_resolve_or_fail_clearly():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.backends.mps.is_available():
        expected = "mps"
    assert resolve_device("auto").type == expected
    assert resolve_dtype("float16") == torch.float16
    with pytest.raises(ConfigError, match="device 'tpu' is unknown; use one of auto, cpu"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="'cuda' is not available"):
            resolve_device("cuda")
    with pytest.raises(ConfigError, match="dtype 'int8' is unknown"):
        resolve_dtype("int8")
