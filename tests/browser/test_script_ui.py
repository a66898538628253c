"""Issue 17: a kernel of a served script links to the line of the script that realized it (the Kernel tab, the
Trace tab, the sidebar), kernels of one name are told apart, and the script's stdout and stderr are shown. The
server runs the script, as `uopviz serve script.py` does."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.support import auth, served_script

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from uopviz import Tensor

    a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = (a * 2).sum(axis=1)
    print("row sums:", b.numpy().tolist())
    print("row maxes:", a.max(axis=1).tolist())
    print("done", file=sys.stderr)
""")
LINE = 8  # the line of `print("row sums:", ...)`, where b is realized
TWIN = 9  # the line realizing a kernel of the same name (a reduction of the same shape)


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`uopviz serve` of the script (its folder is the one the server may read)."""
    with served_script(tmp_path_factory, "row_sums.py", SCRIPT) as url:
        yield url


def test_a_kernel_links_to_its_script_line_and_the_output_is_shown(page: Page, server: str, shots: Path) -> None:
    assert SCRIPT.splitlines()[LINE - 1].startswith('print("row sums:"')
    trace = page.request.get(f"{server}api/traces/row_sums", headers=auth(page, server)).json()
    ci = next(c["index"] for c in trace["contexts"] if c["kind"] == "kernel")
    page.goto(f"{server}#/t/row_sums/c/{ci}/p/0/s/0/v/kernel")
    page.locator(".uv-provenance").wait_for()
    frame = page.locator(".uv-provenance .uv-frame").first
    assert frame.locator(".uv-location").inner_text().endswith(f"row_sums.py:{LINE}")
    assert frame.locator(".uv-frame-code").inner_text() == 'print("row sums:", b.numpy().tolist())'
    assert page.inner_text(f".uv-ctx[data-ci='{ci}'] .uv-made-at") == f"row_sums.py:{LINE}"  # in the sidebar too
    page.screenshot(path=shots / "script-kernel-made-by.png")

    page.click(".uv-tab[data-tab='trace']")
    page.locator(".uv-stdout").wait_for()
    assert page.inner_text(".uv-stdout").strip() == "row sums: [12.0, 44.0, 76.0]\nrow maxes: [3.0, 7.0, 11.0]"
    assert page.inner_text(".uv-stderr").strip() == "done"
    made = page.locator(".uv-made").filter(has_text=f"row_sums.py:{LINE}")
    assert made.locator(".uv-made-context").count() == 2  # the line realized b: its schedule and its kernel
    # laid out top to bottom in the panel's width (not squeezed into columns side by side)
    title, line, out = (page.locator(s).first.bounding_box() for s in (".uv-trace .uv-section-title", ".uv-made",
                                                                        ".uv-stdout"))
    body = page.locator(".uv-tab-body.uv-trace").bounding_box()
    assert title and line and out and body
    assert title["y"] < line["y"] < out["y"] and line["width"] > 0.8 * body["width"]
    made.locator(f".uv-made-context[data-ci='{ci}']").click()  # the kernel opens
    page.wait_for_function("ci => location.hash.includes(`/c/${ci}/`) && location.hash.endsWith('/v/kernel')",
                           arg=ci)
    page.screenshot(path=shots / "script-output.png")


def test_kernels_of_one_name_are_told_apart(page: Page, server: str, shots: Path) -> None:
    trace = page.request.get(f"{server}api/traces/row_sums", headers=auth(page, server)).json()
    kernels = [c for c in trace["contexts"] if c["kind"] == "kernel"]
    assert len(kernels) == 2 and kernels[0]["name"] == kernels[1]["name"]
    page.goto(f"{server}#/t/row_sums/c/{kernels[1]['index']}/p/0/s/0")
    page.locator(".uv-ctx .uv-kname-suffix").first.wait_for()
    rows = page.eval_on_selector_all(".uv-ctx[data-kind='kernel']", "els => els.map(e => [e.querySelector("
                                     "'.uv-kname').textContent, e.querySelector('.uv-made-at').textContent])")
    name = kernels[0]["name"]
    assert rows == [[f"{name} #1", f"row_sums.py:{LINE}"], [f"{name} #2", f"row_sums.py:{TWIN}"]]
    assert page.inner_text(".uv-crumbs .uv-kname") == f"{name} #2"  # the open one, by its label
    page.screenshot(path=shots / "script-twin-kernels.png")
