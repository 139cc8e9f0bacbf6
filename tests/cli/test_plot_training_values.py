"""`rankcollapse plot-training` of logs whose values are not all finite numbers: NaN and Inf
are left out of the figures and counted in a note; a log of text values, a metric with no
finite value and a missing file are one sentence each, and nothing is written."""

from __future__ import annotations

import pytest

from rankcollapse.cli import main
from rankcollapse.measure.monitor import CsvLog, read_log, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "collapse.csv"
    net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on", seed=0))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 5, 8, seed=0), every=1,
                    metrics=["mu_rel"], logs=[CsvLog(path)])  # fmt: skip
    for step in range(3):
        monitor.step(step)
    return path


def with_values(path, values: dict[int, str]):
    lines = path.read_text().splitlines()
    for k, value in values.items():  # k: the row, 0 = the first after the header
        cells = lines[k + 1].split(",")
        cells[5] = value
        lines[k + 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")


def test_nan_and_inf_values_are_left_out_and_counted(log, tmp_path, capsys):
    with_values(log, {0: "nan", 3: "inf", 7: "-inf"})
    out = tmp_path / "figures"
    assert main(["plot-training", str(log), "--metric", "mu_rel", "--out", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert (
        "note: 3 of 18 mu_rel values of" in printed and "are NaN or Inf (first: step 0" in printed
    )
    for name in ("training-heatmap-mu_rel", "training-curves-mu_rel"):
        assert (out / f"{name}.png").read_bytes().startswith(b"\x89PNG")


def test_a_metric_with_no_finite_value_is_one_sentence_and_nothing_written(log, tmp_path, capsys):
    with_values(log, {k: "nan" for k in range(18)})
    out = tmp_path / "figures"
    assert main(["plot-training", str(log), "--metric", "mu_rel", "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "metric 'mu_rel' has no finite value (18 rows, each NaN or Inf); nothing to draw" in err
    assert not out.exists()


def test_a_log_of_text_values_is_one_sentence(log, tmp_path, capsys):
    with_values(log, {k: "high" for k in range(18)})
    with pytest.raises(Exception, match=r"line 2: value 'high' is not a number \(18 of 18"):
        read_log(log)
    out = tmp_path / "figures"
    assert main(["plot-training", str(log), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "cannot be read as a monitor log (line 2: value 'high' is not a number" in err
    assert not out.exists()


def test_plot_training_of_a_missing_file_says_no_file_at(tmp_path, capsys):
    out = tmp_path / "figures"
    assert main(["plot-training", str(tmp_path / "nothing.csv"), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no file at '" in err and "nothing.csv'; pass the CSV a monitor wrote" in err
    assert not out.exists()
