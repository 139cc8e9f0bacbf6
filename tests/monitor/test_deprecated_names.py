"""The monitor's old home, `rankcollapse.monitor`, keeps working for one release: the same
objects as `rankcollapse.measure.monitor`, with a DeprecationWarning naming the new import."""

import importlib
import runpy
import sys

import pytest

from rankcollapse.measure import monitor


def _forget_old_names() -> None:
    """Drop the deprecated modules (only those) so the next import runs them again."""
    for name in [m for m in sys.modules if m.split(".")[:2] == ["rankcollapse", "monitor"]]:
        del sys.modules[name]


def _fresh_import(name: str):
    _forget_old_names()
    return importlib.import_module(name)


def test_the_old_package_re_exports_the_same_names_and_warns():
    with pytest.warns(DeprecationWarning, match="rankcollapse.measure.monitor"):
        old = _fresh_import("rankcollapse.monitor")
    assert set(old.__all__) == set(monitor.__all__)
    assert all(getattr(old, name) is getattr(monitor, name) for name in monitor.__all__)


@pytest.mark.filterwarnings("ignore:rankcollapse.monitor is deprecated")
def test_the_old_trainer_callback_is_the_new_one_and_warns():
    from rankcollapse.measure.monitor.trainer import MonitorCallback

    with pytest.warns(DeprecationWarning, match="rankcollapse.measure.monitor.trainer"):
        old = _fresh_import("rankcollapse.monitor.trainer")
    assert old.MonitorCallback is MonitorCallback


@pytest.mark.filterwarnings("ignore:rankcollapse.monitor is deprecated")
def test_the_old_lightning_callback_is_the_new_one_and_warns():
    pytest.importorskip("lightning", reason="the lightning extra is not installed")
    from rankcollapse.measure.monitor.lightning import MonitorCallback

    with pytest.warns(DeprecationWarning, match="rankcollapse.measure.monitor.lightning"):
        old = _fresh_import("rankcollapse.monitor.lightning")
    assert old.MonitorCallback is MonitorCallback


def test_the_warning_points_at_the_importing_line(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text("import rankcollapse.monitor\n")
    _forget_old_names()
    with pytest.warns(DeprecationWarning) as caught:
        runpy.run_path(str(script))
    assert [w.filename for w in caught] == [str(script)]
