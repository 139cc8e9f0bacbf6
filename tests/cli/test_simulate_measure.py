import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.cli import main


def test_simulate_default_shows_a_pure_attention_network_collapsing(tmp_path, capsys):
    assert main(["simulate", "--n-layers", "6", "--out", str(tmp_path)]) == 0
    df = pd.read_csv(tmp_path / "results.csv")
    assert {"sample", "layer", "metric", "value", "at_floor"} <= set(df.columns)
    res = df[df.metric == "res_comp_rel"].groupby("layer")["value"].mean()
    assert res[0] > 0.5
    assert res[6] < 1e-6 * res[0]
    assert (tmp_path / "collapse.png").stat().st_size > 10_000
    assert "res_comp_rel" in capsys.readouterr().out


def test_simulate_with_skip_keeps_the_residual(tmp_path):
    main(
        [
            "simulate",
            "--n-layers",
            "6",
            "--skip",
            "on",
            "--metrics",
            "res_comp_rel",
            "--out",
            str(tmp_path),
        ]
    )
    df = pd.read_csv(tmp_path / "results.csv")
    assert set(df.metric) == {"res_comp_rel"}
    assert df[df.layer == 6]["value"].mean() > 0.1


def test_simulate_rejects_unknown_metric_naming_it(tmp_path, capsys):
    assert main(["simulate", "--metrics", "mu_rell", "--out", str(tmp_path)]) == 2
    assert "mu_rell" in capsys.readouterr().err
    assert not (tmp_path / "results.csv").exists()


SIM = ["--n-layers", "4", "--n-samples", "3", "--n-tokens", "8", "--metrics", "res_comp_rel"]


def _values(folder) -> pd.DataFrame:
    return pd.read_csv(folder / "results.csv").drop(columns="variant", errors="ignore")


def test_simulate_variants_runs_each_named_network_on_the_same_tokens(tmp_path, capsys):
    """Each variant's rows equal the network its options name alone (san: the default, san+skip:
    --skip on, transformer: --skip on --mlp --norm post), so --variants adds no setting of its
    own; the pure SAN collapses and the skip holds the residual up, as Dong et al. say."""
    out = tmp_path / "variants"
    assert main(["simulate", "--variants", "san,san+skip,transformer", *SIM,
                 "--out", str(out)]) == 0  # fmt: skip
    df = pd.read_csv(out / "results.csv")
    assert list(dict.fromkeys(df.variant)) == ["san", "san+skip", "transformer"]
    legend = (out / "collapse.svg").read_text()  # a curve per variant, named in the legend
    assert all(f"<!-- {name} -->" in legend for name in df.variant.unique())  # its text
    alone = {"san": [], "san+skip": ["--skip", "on"],
             "transformer": ["--skip", "on", "--mlp", "--norm", "post"]}  # fmt: skip
    for variant, options in alone.items():
        folder = tmp_path / variant
        assert main(["simulate", *options, *SIM, "--no-figures", "--out", str(folder)]) == 0
        mine = df[df.variant == variant].drop(columns="variant").reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, _values(folder), check_exact=True)
    last = df[df.layer == 4].groupby("variant").value.mean()
    assert last["san"] < 1e-6 < 0.1 < last["san+skip"]
    assert "variant" in capsys.readouterr().out  # the table has a row per variant and layer


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--variants", "san", "--skip", "on"],
         "--skip on contradicts variant san, whose skip is off"),
        (["--variants", "transformer", "--no-mlp"],
         "--no-mlp contradicts variant transformer, whose mlp is on"),
        (["--variants", "san+skip", "--skip", "on"], None),  # the variant's own: allowed
        (["--variants", "sann"], "unknown toy variant 'sann'"),
        (["--variants", ","], "names no variant"),
        (["--variants", "san,san"], "names ['san'] more than once"),
    ],
)  # fmt: skip
def test_simulate_variants_refuses_what_it_cannot_honour(words, said, tmp_path, capsys):
    code = main(["simulate", *words, *SIM, "--no-figures", "--out", str(tmp_path / "out")])
    if said is None:
        assert code == 0
        return
    assert code == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any folder is made


def _states(layers=3, batch=2, n=5, d=4):
    g = torch.Generator().manual_seed(0)
    return torch.randn(layers, batch, n, d, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("suffix", [".npy", ".pt", ".safetensors"])
def test_measure_reads_every_format_and_matches_the_metric(tmp_path, suffix):
    from rankcollapse.metrics import res_comp_rel

    states = _states()
    path = tmp_path / f"acts{suffix}"
    if suffix == ".npy":
        np.save(path, states.numpy())
    elif suffix == ".pt":
        torch.save(states, path)
    else:
        from safetensors.torch import save_file

        save_file({"states": states}, path)
    assert main(["measure", str(path), "--out", str(tmp_path / "out")]) == 0
    df = pd.read_csv(tmp_path / "out" / "results.csv")
    got = df[(df.metric == "res_comp_rel") & (df.layer == 1)].sort_values("sample")["value"]
    np.testing.assert_allclose(got.to_numpy(), res_comp_rel(states[1]).numpy(), rtol=1e-12)


def test_measure_ignores_padding_given_a_mask(tmp_path):
    states = _states(layers=2, batch=1, n=6)
    padded = states.clone()
    padded[:, :, 4:] = 1e6  # garbage in the pads must not matter
    torch.save(
        {"states": padded, "mask": torch.tensor([[1, 1, 1, 1, 0, 0]]).bool()},
        tmp_path / "padded.pt",
    )
    torch.save(states[:, :, :4].contiguous(), tmp_path / "plain.pt")
    main(["measure", str(tmp_path / "padded.pt"), "--out", str(tmp_path / "a")])
    main(["measure", str(tmp_path / "plain.pt"), "--out", str(tmp_path / "b")])
    a = pd.read_csv(tmp_path / "a" / "results.csv")
    b = pd.read_csv(tmp_path / "b" / "results.csv")
    np.testing.assert_allclose(a["value"], b["value"], rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    "content, message",
    [
        (torch.zeros(7), "expected \\(layers, batch, n, d\\)"),
        ({"acts": torch.zeros(2, 3, 4)}, "expected one of \\['states', 'hidden_states'\\]"),
        (
            {"states": torch.zeros(2, 3, 4), "mask": torch.ones(2, 2)},
            "pass a mask of shape \\(2, 3\\)",
        ),
    ],
)
def test_measure_bad_files_get_clear_errors(tmp_path, capsys, content, message):
    torch.save(content, tmp_path / "bad.pt")
    assert main(["measure", str(tmp_path / "bad.pt"), "--out", str(tmp_path)]) == 2
    import re

    assert re.search(message, capsys.readouterr().err)


def test_measure_rejects_unsupported_suffix(tmp_path, capsys):
    (tmp_path / "acts.txt").write_text("1 2 3")
    assert main(["measure", str(tmp_path / "acts.txt")]) == 2
    assert "supported: .npy, .pt, .safetensors" in capsys.readouterr().err


class _NotATensor:
    pass


def test_measure_refuses_pickled_objects_without_running_them(tmp_path, capsys):
    torch.save({"states": _NotATensor()}, tmp_path / "unsafe.pt")
    (tmp_path / "broken.pt").write_bytes(b"not a torch file")
    for name in ("unsafe.pt", "broken.pt"):
        assert main(["measure", str(tmp_path / name), "--out", str(tmp_path)]) == 2
        assert "does not load safely as tensors" in capsys.readouterr().err


def test_measure_names_nan_values(tmp_path, capsys):
    states = _states(layers=1)
    states[0, 1, 3, 0] = float("nan")
    torch.save(states, tmp_path / "nan.pt")
    assert main(["measure", str(tmp_path / "nan.pt"), "--out", str(tmp_path / "out")]) == 2
    assert "NaN" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("shape", "what"),
    [
        ((0, 2, 5, 4), "0 layers"),
        ((2, 0, 5, 4), "0 sequences"),
        ((2, 2, 0, 4), "0 tokens"),
        ((2, 2, 5, 0), "0 features"),
        ((0, 5, 4), "0 sequences"),
    ],
)
def test_measure_empty_activations_get_a_clear_error(tmp_path, capsys, shape, what):
    torch.save(torch.zeros(shape), tmp_path / "empty.pt")
    assert main(["measure", str(tmp_path / "empty.pt"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"activations have shape {shape}, i.e. {what}" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "results.csv").exists()


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_measure_huge_and_tiny_values_give_the_relative_metrics_of_scale_one(tmp_path, scale):
    states = _states()
    torch.save(states, tmp_path / "one.pt")
    torch.save(states * scale, tmp_path / "scaled.pt")
    metrics = "res_comp_rel,mu_rel,rank1_rel,stable_rank,effective_rank,min_sv"
    for name in ("one", "scaled"):
        path = str(tmp_path / f"{name}.pt")
        assert main(["measure", path, "--metrics", metrics, "--out", str(tmp_path / name)]) == 0
    one = pd.read_csv(tmp_path / "one" / "results.csv")
    scaled = pd.read_csv(tmp_path / "scaled" / "results.csv")
    relative = one.metric != "min_sv"
    np.testing.assert_allclose(scaled["value"][relative], one["value"][relative], rtol=1e-12)
    np.testing.assert_allclose(
        scaled["value"][~relative], scale * one["value"][~relative], rtol=1e-12
    )


def test_no_figures_writes_the_same_results_and_no_figure(tmp_path):
    argv = ["simulate", "--n-layers", "3", "--n-tokens", "8", "--n-samples", "2"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    assert main([*argv, "--no-figures", "--out", str(tmp_path / "b")]) == 0
    written = sorted(p.name for p in (tmp_path / "b").iterdir() if not p.name.startswith("."))
    assert written == ["results.csv"]  # beside the folder's marker, .rankcollapse.json
    assert (tmp_path / "a" / "collapse.svg").is_file()
    assert (tmp_path / "a" / "results.csv").read_bytes() == (
        tmp_path / "b" / "results.csv"
    ).read_bytes()


def test_a_reader_that_goes_away_early_costs_the_output_not_the_files(tmp_path):
    import subprocess
    import sys

    # `rankcollapse simulate | head -1`, or a pager quit at once: the reading end is closed
    # before the table is written, so every write to stdout fails with a broken pipe
    argv = [sys.executable, "-m", "rankcollapse.cli", "simulate", "--n-layers", "4"]
    process = subprocess.Popen(
        [*argv, "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, stderr  # rich's own ended it with 1, before
    assert "Traceback" not in stderr and "Broken pipe" not in stderr
    written = {p.name for p in tmp_path.iterdir()}
    assert {"results.csv", "collapse.png", "collapse.svg"} <= written  # the figure too
    # `list` prints without rich (start-up): a BrokenPipeError's traceback and status 1, before
    listing = subprocess.Popen(
        [sys.executable, "-m", "rankcollapse.cli", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    listing.stdout.close()
    assert listing.stderr.read() == b"" and listing.wait(timeout=60) == 0


@pytest.mark.parametrize("command", ["simulate", "measure"])
def test_the_numbers_are_on_disk_before_the_table_is_printed(command, tmp_path, monkeypatch):
    from rankcollapse.cli import _common
    from rankcollapse.measure import save_activations

    def full(*args, **kwargs):  # stdout on a full disk: the table cannot be printed
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_common, "print_layer_means", full)
    states = tmp_path / "acts.safetensors"
    generator = torch.Generator().manual_seed(0)
    save_activations(states, [torch.randn(2, 4, 8, generator=generator) for _ in range(3)])
    given = {"simulate": ["--n-layers", "3"], "measure": [str(states)]}[command]
    with pytest.raises(OSError, match="No space left"):
        main([command, *given, "--no-figures", "--out", str(tmp_path / "out")])
    assert pd.read_csv(tmp_path / "out" / "results.csv").shape[0] > 0  # lost, before
