"""A mutation fuzzer over a valid model folder (config, weights, tokenizer files): truncate or flip
bytes of a file, delete it, put a folder in its place, replace a config.json value by another JSON type, delete a key. Each
mutated folder either loads and is probed, or fails with one clear line (a RankCollapseError,
exit code 2 at the prompt); never another exception, never a second line."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rankcollapse.cli import main
from rankcollapse.errors import RankCollapseError
from rankcollapse.hf import load_model, tiny_model
from rankcollapse.measure import probe

FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 1, 3, 2**31, 2**63, -(2**70), 1.5, float("inf")]),
    st.text(max_size=6),
    st.lists(st.integers(-2, 40), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@pytest.fixture(scope="module")
def valid_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import BertTokenizerFast

    folder = tmp_path_factory.mktemp("model") / "tiny-bert"
    tiny_model("bert").save_pretrained(folder)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"w{i}" for i in range(59))]
    tokenizer = BertTokenizerFast(vocab={word: i for i, word in enumerate(words)})
    tokenizer.save_pretrained(folder)  # the model's 64 ids
    assert set(FILES) <= {p.name for p in folder.iterdir()}
    assert len(load_model(str(folder)).tokenizer) == 64
    return folder


def mutate(folder: Path, data: st.DataObject) -> str:
    """Apply one drawn mutation to `folder`; returns what was done, for the failure message."""
    name = data.draw(st.sampled_from(FILES), label="file")
    path = folder / name
    kind = data.draw(
        st.sampled_from(["truncate", "flip", "delete", "folder", "json-value", "json-key"])
    )
    if not path.is_file() or path.stat().st_size == 0:
        return f"{name} already gone"
    content = path.read_bytes()
    if kind == "truncate":
        size = data.draw(st.integers(0, len(content) - 1), label="size")
        path.write_bytes(content[:size])
        return f"{name} truncated to {size} bytes"
    if kind == "flip":
        where = data.draw(st.lists(st.integers(0, len(content) - 1), min_size=1, max_size=4))
        flipped = bytearray(content)
        for i in where:
            flipped[i] ^= data.draw(st.integers(1, 255), label="mask")
        path.write_bytes(bytes(flipped))
        return f"{name} bytes {where} flipped"
    if kind == "delete":
        path.unlink()
        return f"{name} deleted"
    if kind == "folder":
        path.unlink()
        path.mkdir()
        return f"{name} replaced by a folder"
    try:
        config = json.loads((folder / "config.json").read_bytes())
    except (OSError, ValueError):
        return "config.json already damaged"
    if not isinstance(config, dict) or not config:
        return "config.json already damaged"
    key = data.draw(st.sampled_from(sorted(config)), label="key")
    if kind == "json-key":
        del config[key]
        change = f"config.json without {key!r}"
    else:
        config[key] = data.draw(JSON_VALUES, label="value")
        change = f"config.json {key!r} = {config[key]!r}"
    (folder / "config.json").write_text(json.dumps(config))
    return change


@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_mutated_model_folder_loads_or_fails_with_one_clear_line(data, valid_folder):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        shutil.copytree(valid_folder, folder)
        changes = [mutate(folder, data) for _ in range(data.draw(st.integers(1, 2)))]
        try:
            loaded = load_model(str(folder))
            frame = probe(loaded, random_tokens=True, n_samples=2, n_tokens=4,
                          metrics=["res_comp_rel"])  # fmt: skip
        except RankCollapseError as err:
            message = str(err)
            event(f"clear error: {message.split(chr(39) + ' ', 1)[-1].split(' (')[0][:50]}")
            assert "\n" not in message.strip(), f"{changes}: {message}"
            assert len(message) < 1000, f"{changes}: {message}"
            return
        event("loaded and probed")
        assert len(frame) > 0, changes


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("empty", r"is empty; pass a folder saved with save_pretrained"),
        ("tokenizer-only", r"has files \(vocab.txt\) but no config.json"),
        ("bin-only", r"holds pytorch_model.bin but no model.safetensors; only safetensors"),
        ("wrong-shapes", r"has tensor .* of shape \(64,\) .* config.json makes it \(48,\)"),
        ("deep-config", r"has no usable config.json \(JSON nested too deeply\)"),
        ("missing-layer", r"has weights without 16 of the \d+ tensors its config.json asks for"),
    ],
)
def test_a_model_folder_error_is_one_line_at_the_prompt(
    valid_folder, tmp_path, capsys, change, message
):
    folder = tmp_path / "model"
    shutil.copytree(valid_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    if change in ("empty", "tokenizer-only"):
        for path in folder.iterdir():
            path.unlink()
        if change == "tokenizer-only":
            (folder / "vocab.txt").write_text("[PAD]\nhello\n")
    elif change == "bin-only":
        (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    elif change == "wrong-shapes":
        (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": 48}))
    elif change == "deep-config":
        (folder / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    else:
        (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    code = main(["probe", str(folder), "--random-tokens", "--n-samples", "2", "--n-tokens", "4",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    printed = capsys.readouterr().err
    assert code == 2
    assert len(printed.strip().splitlines()) == 1 and "Traceback" not in printed
    assert re.search(message, " ".join(printed.split())), printed
