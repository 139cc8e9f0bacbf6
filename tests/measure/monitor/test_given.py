"""The monitor checks what it is given, once, at watch() (blocks, held-out batch, metrics,
logs), `step` on every call, and reads its logs through the bounded reader: each case of
docs/reliability.md is a clear `RankCollapseError` in Python words, nothing written."""

from __future__ import annotations

import sys

import pandas as pd
import pytest
import torch
from fifos import fifo
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

from rankcollapse.errors import ConfigError, InputError, RankCollapseError
from rankcollapse.measure import probe
from rankcollapse.measure.monitor import CsvLog, MemoryLog, read_log, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens


def tiny_gpt2(seed: int = 0) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    config = GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=64, n_positions=32,
                        bos_token_id=1, eos_token_id=2)  # fmt: skip
    return GPT2LMHeadModel(config)


def toy(**options) -> tuple[ToyNet, torch.Tensor]:
    return ToyNet(NetConfig(n_layers=2, d_model=8, **options)), random_tokens(2, 4, 8, seed=0)


class DictBlocks(nn.Module):
    """A model whose blocks return a dict (the residual stream under a key)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([DictBlock(), DictBlock()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)["hidden"]
        return x


class DictBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return {"hidden": x + self.linear(x)}


def test_a_block_of_another_model_is_refused_at_watch():
    net, x = toy()
    other, _ = toy()
    with pytest.raises(
        ConfigError, match=r"blocks\[0\] \(a Block\) is not a module of this ToyNet"
    ):
        watch(net, blocks=[other.blocks[0]], inputs=x)


def test_a_block_returning_a_dict_is_named_at_watch():
    with pytest.raises(InputError, match=r"layer 1 \(the output of blocks\[0\], a DictBlock\) is "
                       "a dict, not a tensor of states"):  # fmt: skip
        watch(
            DictBlocks(),
            blocks="layers",
            inputs=torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(0)),
        )


class Linears(nn.Module):
    """Blocks of width 8 and no check of their input."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_a_batch_the_module_cannot_run_is_one_error_at_watch():
    with pytest.raises(InputError, match=r"the held-out batch does not run through the Linears "
                       r"\(RuntimeError: .*\); pass inputs= that model\(inputs\) takes"):  # fmt: skip
        watch(
            Linears(),
            blocks="layers",
            inputs=torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(0)),
        )  # width 8


def test_float_token_ids_and_ids_beyond_the_vocabulary_are_refused_at_watch():
    model = tiny_gpt2()
    with pytest.raises(InputError, match="inputs holds torch.float32 values, not token ids"):
        watch(model, inputs=torch.rand(2, 6, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(InputError, match="token ids from 3 to 99 but .* vocabulary of 64"):
        watch(model, inputs=torch.tensor([[3, 4, 99], [5, 6, 7]]))
    with pytest.raises(InputError, match="fewer than 2 real tokens"):
        watch(model, inputs=torch.tensor([[3, 4, 5]]), token_mask=torch.tensor([[1, 0, 0]]) > 0)


def test_a_metric_as_a_plain_string_is_one_metric_and_bad_names_are_refused():
    net, x = toy()
    rows = watch(net, blocks="blocks", inputs=x, metrics="mu_rel").step(0)
    assert set(rows["metric"]) == {"mu_rel"}
    assert set(watch(net, blocks="blocks", inputs=x, metrics="mu_rel, mu").step(0)["metric"]) == {
        "mu_rel", "mu"}  # fmt: skip
    with pytest.raises(ConfigError, match=r"metrics names \['mu_rel'\] more than once"):
        watch(net, blocks="blocks", inputs=x, metrics=["mu_rel", "mu_rel"])
    with pytest.raises(ConfigError, match="metrics takes names"):
        watch(net, blocks="blocks", inputs=x, metrics=[1])


def test_logs_must_be_a_list_of_logs():
    net, x = toy()
    with pytest.raises(ConfigError, match=r"logs takes a list of logs.*logs=\[CsvLog"):
        watch(net, blocks="blocks", inputs=x, logs=MemoryLog())
    with pytest.raises(ConfigError, match=r"logs\[0\] is 'collapse.csv', not a log"):
        watch(net, blocks="blocks", inputs=x, logs=["collapse.csv"])


@pytest.mark.parametrize("bad", ["5", 5.0, True, -3, None])
def test_step_checks_its_argument_on_every_call(bad):
    net, x = toy()
    log = MemoryLog()
    monitor = watch(net, blocks="blocks", inputs=x, every=1, metrics=["mu_rel"], logs=[log])
    monitor.step(0)
    with pytest.raises(InputError, match=r"an int >= 0\), got"):
        monitor.step(bad)
    assert log.frame["step"].tolist() == [0] * 6  # 3 layers x 2 samples; nothing more


def test_a_step_that_goes_back_or_repeats_is_refused_and_nothing_is_logged():
    net, x = toy()
    log = MemoryLog()
    monitor = watch(net, blocks="blocks", inputs=x, every=1, metrics=["mu_rel"], logs=[log])
    for step in (0, 1, 5):
        monitor.step(step)
    for again in (5, 3):
        with pytest.raises(InputError, match="comes after step 5: steps only go forward"):
            monitor.step(again)
    monitor.step(6)
    assert sorted(log.frame["step"].unique()) == [0, 1, 5, 6]


def _log_with(tmp_path, **options):
    net, x = toy()
    path = tmp_path / "collapse.csv"
    watch(net, blocks="blocks", inputs=x, metrics=["mu_rel"], logs=[CsvLog(path)],
          **options).step(0)  # fmt: skip
    return path


def test_a_one_step_log_of_other_metrics_is_refused_not_trimmed(tmp_path):
    path = _log_with(tmp_path)
    before = path.read_bytes()
    net, x = toy()
    with pytest.raises(InputError, match=r"another monitor setup \(metrics: the log's"):
        watch(net, blocks="blocks", inputs=x, metrics=["mu"], logs=[CsvLog(path)])
    assert path.read_bytes() == before


def test_a_log_of_another_model_or_batch_is_refused_naming_what_differs(tmp_path):
    path = _log_with(tmp_path)
    deeper = ToyNet(NetConfig(n_layers=3, d_model=8))
    x = random_tokens(2, 4, 8, seed=0)
    with pytest.raises(InputError, match=r"model: the log's .*'n_blocks': 2.*'n_blocks': 3"):
        watch(deeper, blocks="blocks", inputs=x, metrics=["mu_rel"], logs=[CsvLog(path)])
    net, _ = toy()
    other = random_tokens(2, 4, 8, seed=1)
    with pytest.raises(InputError, match=r"setup \(inputs: the log's"):
        watch(net, blocks="blocks", inputs=other, metrics=["mu_rel"], logs=[CsvLog(path)])


def test_a_log_of_an_older_version_without_its_setup_is_checked_by_its_rows(tmp_path):
    path = _log_with(tmp_path)
    (tmp_path / "collapse.csv.setup.json").unlink()
    net, x = toy()
    with pytest.raises(InputError, match="another monitor setup"):
        watch(net, blocks="blocks", inputs=x, metrics=["mu"], logs=[CsvLog(path)])
    monitor = watch(net, blocks="blocks", inputs=x, every=1, metrics=["mu_rel"],
                    logs=[CsvLog(path)])  # fmt: skip
    monitor.step(1)
    assert (tmp_path / "collapse.csv.setup.json").is_file()
    assert read_log(path)["step"].unique().tolist() == [0, 1]


def test_a_model_in_memory_without_a_tokenizer_names_the_python_fix():
    with pytest.raises(InputError, match=r"in memory without a tokenizer.*random_tokens=True"):
        watch(tiny_gpt2(), n_tokens=8)
    with pytest.raises(InputError, match=r"random_tokens=True"):
        probe(tiny_gpt2(), n_samples=2, n_tokens=8)


def test_the_same_model_on_the_command_line_names_the_flags(tmp_path, capsys):
    from rankcollapse.cli import main

    tiny_gpt2().save_pretrained(tmp_path / "gpt")  # no tokenizer files
    assert main(["probe", str(tmp_path / "gpt"), "--n-samples", "1", "--n-tokens", "4",
                 "--no-figures", "--out", str(tmp_path / "out")]) == 2  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert "--random-tokens" in err and "--tokenizer DIR" in err and "random_tokens=" not in err


def test_logs_that_are_not_monitor_logs_are_clear_errors(tmp_path):
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"step,layer\x00\xff\n")
    nan = tmp_path / "nan.csv"
    nan.write_text("step,layer,variant,sample,metric,value,at_floor\n"
                   "nan,0,transformer,0,mu_rel,0.5,False\n")  # fmt: skip
    long = tmp_path / "long.csv"
    long.write_bytes(b"step," + b"x" * 2_000_000 + b"\n")
    cases = {folder: "a folder where a file belongs", binary: "binary data",
             nan: "line 2: step 'nan' is not a whole number", long: "longer than 1,000,000 bytes"}  # fmt: skip
    for path, message in cases.items():
        with pytest.raises(InputError, match=message):
            read_log(path)
    net, x = toy()
    with pytest.raises(ConfigError, match="is a folder"):
        watch(net, blocks="blocks", inputs=x, logs=[CsvLog(folder)])
    with pytest.raises(InputError, match="binary data"):
        watch(net, blocks="blocks", inputs=x, logs=[CsvLog(binary)])


@pytest.mark.skipif(sys.platform == "win32", reason="named pipes are POSIX")
def test_a_fifo_as_a_log_is_refused_unopened(tmp_path):
    pipe = fifo(tmp_path / "collapse.csv")  # opening it for reading would wait forever
    with pytest.raises(InputError, match=r"named pipe \(FIFO\), not a file; it is never opened"):
        read_log(pipe)
    net, x = toy()
    with pytest.raises(InputError, match="never opened"):
        watch(net, blocks="blocks", inputs=x, logs=[CsvLog(pipe)])


def test_plot_training_of_a_fifo_is_one_line(tmp_path, capsys):
    from rankcollapse.cli import main

    pipe = fifo(tmp_path / "collapse.csv")
    assert main(["plot-training", str(pipe)]) == 2
    assert "never opened" in capsys.readouterr().err


def test_attention_metrics_of_a_hugging_face_model_equal_the_probe():
    model = tiny_gpt2()
    options = {"random_tokens": True, "n_samples": 2, "n_tokens": 8, "seed": 1}
    names = ["attn_entropy", "attn_dist_uniform", "mu_rel"]
    rows = watch(model, metrics=names, variants=["transformer", "san"], **options).step(0)
    expected = probe(model, metrics=names, variants=["transformer", "san"], **options)
    key = ["variant", "layer", "sample", "metric"]
    got = rows.set_index(key).sort_index()
    want = expected.set_index(key).sort_index()
    assert got.index.equals(want.index) and (got["value"] == want["value"]).all()
    attention = rows[rows["metric"] == "attn_entropy"]
    assert sorted(attention["layer"].unique()) == [1, 2]  # layer 0 has no attention
    assert isinstance(rows, pd.DataFrame)


def test_every_refusal_is_a_rank_collapse_error():
    assert issubclass(InputError, RankCollapseError) and issubclass(ConfigError, RankCollapseError)
