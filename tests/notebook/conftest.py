"""Notebook tests: the example notebooks run headless (nbclient, a real ipykernel), then the test talks to their
widgets over the same comm the browser uses (ipywidgets' custom messages) and reads their synced traitlets."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CELL_TIMEOUT_S = 600


@dataclass
class Ran:
    """An executed notebook: its cells with their outputs, each widget's synced state by model id, and the answers
    to the requests the test sent over the widgets' comms (in the order asked)."""

    nb: Any
    widgets: dict[str, dict[str, Any]]
    replies: list[dict[str, Any]] = field(default_factory=list)

    def of(self, model: str, **traits: Any) -> list[tuple[str, dict[str, Any]]]:
        """(model id, state) of the widgets of a Python class (TraceView, BeamView) with these trait values."""
        return [(cid, s) for cid, s in self.widgets.items() if s.get("_anywidget_id", "").endswith(f".{model}")
                and all(s.get(k) == v for k, v in traits.items())]


Ask = list[tuple[str, dict[str, Any]]]  # (model id, message content), or a function of the widgets making them


class Comm:
    """Requests to a running kernel's widgets, as the widget's JS sends them, and their responses."""

    def __init__(self, client: Any) -> None:
        self.client, self.ids = client, itertools.count(1)

    async def request(self, comm_id: str, method: str, *args: Any) -> dict[str, Any]:
        """One data-source request; the response message ({response, ok} or {response, error})."""
        rid = next(self.ids)
        await self.send(comm_id, {"request": rid, "method": method, "args": list(args)})
        return await self.wait(comm_id, lambda m: m.get("response") == rid)

    async def send(self, comm_id: str, content: dict[str, Any]) -> None:
        kc = self.client.kc
        msg = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": content}})
        kc.shell_channel.send(msg)

    async def wait(self, comm_id: str, match: Any, timeout: float = 120) -> dict[str, Any]:
        while True:
            m = await self.client.kc.get_iopub_msg(timeout=timeout)
            c = m["content"]
            if m["msg_type"] == "comm_msg" and c.get("comm_id") == comm_id and c["data"].get("method") == "custom" \
                    and match(c["data"]["content"]):
                return c["data"]["content"]


def execute(name: str, work: Path, talk: Any = None, folder: Path = EXAMPLES) -> Ran:
    """Run folder/NAME (examples/ by default) in `work` (a copy, with its own tuning database and kernel cache),
    top to bottom; then `talk(comm, widgets)` (a coroutine) may send requests over the widgets' comms while the
    kernel still runs."""
    import nbformat
    from nbclient import NotebookClient

    if folder != work:
        shutil.copy(folder / name, work / name)
    nb = nbformat.read(work / name, as_version=4)
    env = {**os.environ, "UOPVIZ_CACHE_DIR": str(work / "cache")}
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(work)}})

    async def run() -> Ran:
        async with client.async_setup_kernel(env=env, cwd=str(work)):
            for i, cell in enumerate(nb.cells):
                await client.async_execute_cell(cell, i)
            ran = Ran(nb, {cid: dict(s) for cid, s in client.widget_state.items()})
            if talk is not None:
                ran.replies = await talk(Comm(client), ran)
            return ran

    return asyncio.run(run())


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
