"""`rankcollapse plot-training` draws a monitor's CSV logs, one or several side by side."""

from __future__ import annotations

from rankcollapse.cli import main
from rankcollapse.measure.monitor import CsvLog, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens


def write_log(path, skip: str) -> None:
    net = ToyNet(NetConfig(n_layers=3, d_model=8, skip=skip))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 5, 8, seed=0), every=1,
                    logs=[CsvLog(path)])  # fmt: skip
    for step in range(3):
        monitor.step(step)


def test_plot_training_writes_the_heatmap_and_curves_of_several_logs(tmp_path, capsys):
    write_log(tmp_path / "san.csv", "off")
    write_log(tmp_path / "skip.csv", "on")
    out = tmp_path / "figures"
    code = main(["plot-training", str(tmp_path / "san.csv"), str(tmp_path / "skip.csv"),
                 "--metric", "mu_rel", "--out", str(out)])  # fmt: skip
    assert code == 0
    for name in ("training-heatmap", "training-curves"):
        assert (out / f"{name}.png").stat().st_size > 0 and (out / f"{name}.svg").exists()
    printed = capsys.readouterr().out
    assert "san" in printed and "skip" in printed


def test_plot_training_names_a_file_that_is_not_a_monitor_log(tmp_path, capsys):
    notes = tmp_path / "notes.csv"
    notes.write_text("a,b\n1,2\n")
    assert main(["plot-training", str(notes)]) == 2
    assert "not a monitor log" in capsys.readouterr().err
