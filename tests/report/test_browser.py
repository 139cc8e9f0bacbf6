"""Reports as a reader sees them: rendered in headless Chromium (Debian's `chromium`).

Two fast quick reports are checked here; `python tests/report/chromium.py results/` checks
every report under a folder (all 16 quick reports after `rankcollapse run all`).
"""

from __future__ import annotations

import pytest
from chromium import VIEWPORT, Browser, find_chromium

from rankcollapse.runner import run_experiment

BINARY = find_chromium()
pytestmark = pytest.mark.skipif(
    BINARY is None, reason="no chromium binary on PATH (apt-get install -y chromium)"
)
FAST_QUICK = ["toy-collapse", "dong2021-bounds"]  # about a second of units each


@pytest.fixture(scope="module")
def browser():
    with Browser(BINARY) as b:
        yield b


@pytest.fixture(scope="module", params=FAST_QUICK)
def report(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("browser") / request.param
    return run_experiment(request.param, preset="quick", out=out).report_path


def test_quick_report_has_no_broken_image_error_blur_or_excess_height(browser, report):
    page = browser.open(report)
    assert page.images, "a quick report shows at least its main figure"
    assert page.problems() == []


def test_main_figure_is_on_the_first_screen(browser, report):
    page = browser.open(report, screenshot=True)
    assert page.screenshot.startswith(b"\x89PNG")
    width = int.from_bytes(page.screenshot[16:20], "big")
    assert width == VIEWPORT[0]
    first = page.images[0]
    assert 0 < first["drawn"][0] <= VIEWPORT[0]


def test_problems_name_a_broken_image_an_upscaled_one_and_a_long_page():
    from chromium import Page

    page = Page(
        height=30_000,
        images=[
            {"alt": "gone", "complete": True, "natural": [0, 0], "drawn": [0, 0]},
            {"alt": "small", "complete": True, "natural": [400, 300], "drawn": [800, 600]},
        ],
        errors=["Failed to load resource"],
    )
    problems = page.problems(height_budget=16_000)
    assert problems == [
        "console: Failed to load resource",
        "broken image 'gone'",
        "image 'small' is [400, 300] px drawn at [800, 600]",
        "page is 30000 px tall (budget 16000)",
    ]
