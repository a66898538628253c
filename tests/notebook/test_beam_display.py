"""uopviz.search.beam with its default progress, run in a notebook, shows the live BEAM widget (the hook the package
face sets: uopviz.hooks.beam_display), ending with the results table; outside a notebook it prints its status line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.notebook.conftest import execute

pytestmark = pytest.mark.slow

CELLS = ["""import uopviz
from uopviz.kernels import get
from uopviz.pipeline import kernels_of, schedule
from uopviz.search import beam
z = get("sum")
(ast, _), = kernels_of(schedule([z.build(z.sizes(small=True), "CPU")[0].uop]))
r = beam(ast, 1, "CPU", max_rounds=1)
print(r.name)"""]


def test_a_search_in_a_notebook_shows_itself_live(work: Path) -> None:
    cells = [{"cell_type": "code", "id": f"c{k}", "metadata": {}, "execution_count": None, "outputs": [],
              "source": c} for k, c in enumerate(CELLS)]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = {"cells": cells, "metadata": {"kernelspec": kernelspec}, "nbformat": 4, "nbformat_minor": 5}
    (work / "search.ipynb").write_text(json.dumps(nb))
    ran = execute("search.ipynb", work, folder=work)
    (_, view), = ran.of("BeamView")
    assert view["status"] == "done" and len(view["kernels"]) == 1 and view["label"].endswith(" on CPU")
    kinds = [e["event"] for e in view["events"]]
    assert kinds[0] == "start" and "candidate" in kinds and kinds[-1] == "done"
    assert view["summary"]["kernels"][0]["kernel"] == view["kernels"][0]
    printed = "".join(o.get("text", "") for o in ran.nb.cells[0]["outputs"])
    assert printed.strip() == view["summary"]["kernels"][0]["name"]
    assert "beam r_" not in printed  # the status line is the terminal's, not the notebook's
