"""Every outside file is read through `rankcollapse.reading` within a stated bound: special
files are refused before they are opened, sizes before they are read, YAML with the safe
loader and depth and alias guards, CSV line by line, safetensors by their header only."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from fifos import fifo
from safetensors import safe_open
from safetensors.torch import save_file

from rankcollapse.errors import RankCollapseError
from rankcollapse.reading import (
    MAX_YAML_DEPTH,
    UnreadableFileError,
    check_csv,
    parse_yaml,
    read_bytes,
    read_json,
    read_text,
    read_yaml,
    safetensors_header,
)

pytestmark = pytest.mark.usefixtures("no_hang")  # a FIFO opened fails, never hangs


def error(problem: str) -> RankCollapseError:
    return RankCollapseError(problem)


READERS = [
    lambda p: read_bytes(p, 100),
    lambda p: read_text(p, 100),
    lambda p: read_json(p, 100),
    lambda p: read_yaml(p, 100),
    lambda p: check_csv(p, 100),
    lambda p: safetensors_header(p, 100),
]


@pytest.mark.parametrize("reader", READERS)
def test_a_fifo_a_device_a_folder_and_a_missing_file_are_refused_unopened(reader, tmp_path):
    fifo(tmp_path / "pipe")  # no writer: opening it for reading would block
    cases = {
        tmp_path / "pipe": "a named pipe (FIFO), not a file; it is never opened",
        "/dev/zero": "a device, not a file",
        tmp_path: "a folder where a file belongs",
        tmp_path / "missing": "(missing)",
    }
    for path, says in cases.items():
        with pytest.raises(UnreadableFileError, match=r"cannot be read \(") as caught:
            reader(path)
        assert says in str(caught.value) and str(path) in str(caught.value)


def test_a_file_over_its_bound_is_refused_before_it_is_read(tmp_path):
    (tmp_path / "big.json").write_text(json.dumps({"x": "y" * 200}))
    with pytest.raises(UnreadableFileError, match=r"2\d\d bytes, more than the 100 such"):
        read_json(tmp_path / "big.json", 100)
    assert read_json(tmp_path / "big.json", 1000) == {"x": "y" * 200}


def test_text_that_is_not_utf8_and_json_that_is_not_json_name_the_place(tmp_path):
    (tmp_path / "bin").write_bytes(b"ab\xff")
    with pytest.raises(UnreadableFileError, match="not UTF-8 text at byte 2"):
        read_text(tmp_path / "bin", 10)
    (tmp_path / "bad.json").write_text('{"a":\n1,}')
    with pytest.raises(UnreadableFileError, match="not JSON: line 2"):
        read_json(tmp_path / "bad.json", 100)
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UnreadableFileError, match="JSON nested too deeply"):
        read_json(tmp_path / "deep.json", 1_000_000)


def test_a_callers_error_carries_its_wording(tmp_path):
    with pytest.raises(RankCollapseError, match="^missing$"):
        read_text(tmp_path / "missing", 10, error=error)


def test_yaml_is_read_safely_with_depth_and_alias_guards():
    assert parse_yaml("a: [1, {b: 2}]\n", error=error) == {"a": [1, {"b": 2}]}
    with pytest.raises(RankCollapseError, match="could not determine a constructor"):
        parse_yaml("a: !!python/object/apply:os.system [ls]\n", error=error)
    nested = "a: " + "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH
    with pytest.raises(RankCollapseError, match=f"nested more than {MAX_YAML_DEPTH} levels"):
        parse_yaml(nested, error=error)
    assert parse_yaml("a: " + "[" * 10 + "]" * 10, error=error) is not None
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(6)
    )
    with pytest.raises(RankCollapseError, match="expands to more than 100,000 values"):
        parse_yaml(laughs, error=error)


def test_a_csv_is_checked_line_by_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n")
    check_csv(path, 100)
    cases = {
        "a,b\n1\n": "line 2 has 1 of 2 columns",
        "a,b\n1,\x00\n": r"line 2 holds binary data \(a NUL byte\)",
        "a,b\n" + "1" * 50 + ",2\n": "line 2 is longer than 20 bytes",
        "": r"\(empty\)",
    }
    for text, says in cases.items():
        path.write_text(text)
        with pytest.raises(UnreadableFileError, match=says):
            check_csv(path, 1000, max_line=20)


def test_a_safetensors_header_gives_what_safetensors_reads(tmp_path):
    path = tmp_path / "w.safetensors"
    save_file({"a": torch.zeros(2, 3), "b": torch.ones(4, dtype=torch.int64),
               "empty": torch.zeros(0, 5)}, path)  # fmt: skip
    header = safetensors_header(path, 10_000)
    with safe_open(path, framework="pt") as f:
        expected = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    assert {name: shape for name, (_, shape) in header.items()} == expected
    assert header["b"] == ("I64", (4,))


def _with_header(path, header: dict, n_data: int) -> None:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * n_data)


@pytest.mark.parametrize(
    ("header", "n_data", "says"),
    [
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 4, "4 bytes of data"),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, 4, "do not fit its"),
        ({"a": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 8]}}, 8, "is not a tensor's"),
        ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 8]}}, 8, "is not a tensor's"),
        ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, 8, "leave a gap"),
        ({"a": [1, 2]}, 8, "is not a tensor's"),
    ],
)
def test_a_damaged_safetensors_header_is_refused(header, n_data, says, tmp_path):
    _with_header(tmp_path / "w.safetensors", header, n_data)
    with pytest.raises(UnreadableFileError, match=says):
        safetensors_header(tmp_path / "w.safetensors", 10_000)


def test_a_safetensors_header_longer_than_its_file_is_refused(tmp_path):
    (tmp_path / "w.safetensors").write_bytes(struct.pack("<Q", 2**40) + b"{}")
    with pytest.raises(UnreadableFileError, match="a header of 1,099,511,627,776 bytes"):
        safetensors_header(tmp_path / "w.safetensors", 10_000)
    (tmp_path / "w.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(UnreadableFileError, match="shorter than a safetensors header"):
        safetensors_header(tmp_path / "w.safetensors", 10_000)


# Saved activations: the file `rankcollapse measure` reads, written by `save_activations`.


def test_save_activations_round_trips_states_and_mask_through_measure_file(tmp_path):
    from rankcollapse.measure import measure_file, save_activations
    from rankcollapse.metrics import measure_layers

    g = torch.Generator().manual_seed(0)
    layers = [torch.randn(3, 6, 5, generator=g, dtype=torch.float64) for _ in range(4)]
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 4:] = False
    path = save_activations(tmp_path / "acts.safetensors", layers, mask)
    with safe_open(path, framework="pt") as f:
        assert torch.equal(f.get_tensor("states"), torch.stack(layers))
        assert torch.equal(f.get_tensor("mask"), mask)
    frame = measure_file(path, metrics=["mu_rel", "res_comp_rel"])
    expected = measure_layers(layers, mask, metrics=["mu_rel", "res_comp_rel"])
    assert frame["value"].tolist() == expected["value"].tolist()


@pytest.mark.parametrize(
    "states, mask, match",
    [
        ([], None, "non-empty sequence"),
        ([torch.zeros(2, 3, 4), torch.zeros(2, 4, 4)], None, "different shapes"),
        (torch.zeros(2, 3, 4, dtype=torch.int64), None, "dtype torch.int64"),
        (torch.zeros(2, 3, 4, 5), torch.ones(3, 5), r"mask has shape \(3, 5\).*\(3, 4\)"),
    ],
)
def test_save_activations_refuses_what_measure_could_not_read(tmp_path, states, mask, match):
    from rankcollapse.measure import save_activations

    with pytest.raises(RankCollapseError, match=match):
        save_activations(tmp_path / "acts.safetensors", states, mask)
    assert not list(tmp_path.iterdir())
    with pytest.raises(RankCollapseError, match="NAME.safetensors, not 'acts.pt'"):
        save_activations(tmp_path / "acts.pt", torch.zeros(2, 3, 4))


def test_measure_file_checks_metrics_device_and_header_before_reading(tmp_path):
    from rankcollapse.measure import measure_file

    (tmp_path / "bad.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(RankCollapseError, match="bad.safetensors' is not a readable safetensors"):
        measure_file(tmp_path / "bad.safetensors")
    with pytest.raises(RankCollapseError, match="mu_rell"):
        measure_file(tmp_path / "bad.safetensors", metrics=["mu_rell"])
    with pytest.raises(RankCollapseError, match="no file at"):
        measure_file(tmp_path / "missing.npy")


@pytest.mark.filterwarnings("ignore:HookedTransformer is deprecated")
@pytest.mark.parametrize("kind", ["hooked", "bridge"])
def test_a_file_of_a_transformerlens_cache_gives_the_probe_s_numbers(kind, tmp_path):
    """The README's recipe: blocks.0.hook_resid_pre and every hook_resid_post of a
    run_with_cache, saved, then measured, equal the probe of the same model and ids: a
    HookedTransformer (TransformerLens 3; skipped on 4) and a TransformerBridge (3.9 and 4)."""
    from lens_models import bridge, hooked_transformer

    from rankcollapse.measure import ProbeInputs, measure_file, probe, save_activations

    model = hooked_transformer() if kind == "hooked" else bridge("native")
    metrics = ["res_comp_rel", "mu_rel", "stable_rank"]
    probed = probe(model, random_tokens=True, n_samples=3, n_tokens=8, metrics=metrics)
    ids, mask = ProbeInputs(random_tokens=True, n_samples=3, n_tokens=8).build(model)
    _, cache = model.run_with_cache(ids)
    states = [cache["blocks.0.hook_resid_pre"]]
    states += [cache[f"blocks.{l}.hook_resid_post"] for l in range(model.cfg.n_layers)]
    measured = measure_file(save_activations(tmp_path / "acts.safetensors", states, mask),
                            metrics=metrics)  # fmt: skip
    key = ["layer", "sample", "metric"]
    a = probed.sort_values(key)[[*key, "value"]].reset_index(drop=True)
    b = measured.sort_values(key)[[*key, "value"]].reset_index(drop=True)
    assert a[key].equals(b[key])
    assert (a["value"] - b["value"]).abs().max() <= 1e-12


def test_a_model_folder_named_in_bytes_is_refused_in_a_sentence_shown_escaped(tmp_path, capsys):
    import os

    from rankcollapse.cli import main
    from rankcollapse.hf import tiny_model
    from rankcollapse.measure import probe

    folder = tmp_path / os.fsdecode(b"m-\xff\xfe")
    tiny_model("gpt2").save_pretrained(folder)
    args = ["probe", str(folder), "--random-tokens", "--no-figures", "--out", str(tmp_path / "o")]
    assert main(args) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "m-\\xff\\xfe' has a path that is not UTF-8 text" in err and "Traceback" not in err
    with pytest.raises(RankCollapseError, match="rename the folder"):
        probe(str(folder), random_tokens=True)
