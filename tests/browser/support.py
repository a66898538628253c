"""What the browser tests share: the API as the page reads it, waiting for a drawn view, a served script."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from shared_libraries import cache_with_shared_libraries
from uopviz.backend.child import served

if TYPE_CHECKING:
    from playwright.sync_api import Page


def server_cache(tmp: pytest.TempPathFactory) -> Path:
    """A new cache folder for one `uopviz serve`, whose compiled libraries are those of every server of this pytest
    process (each module's server records the zoo, and compiled its 21 libraries again: about 2 s of a loaded core)."""
    return cache_with_shared_libraries(tmp.mktemp("cache") / "cache", tmp.getbasetemp() / "server-libraries")


@contextmanager
def served_script(tmp: pytest.TempPathFactory, name: str, text: str) -> Iterator[str]:
    """`uopviz serve` of one script written to a folder of its own (the folder the server may read); yields the URL
    it printed, with its token."""
    folder = tmp.mktemp("scripts")
    (folder / name).write_text(text)
    with served(str(tmp.mktemp("cache")), str(folder / name)) as url:
        yield url


def auth(page: Page, server: str) -> dict[str, str]:
    """The Authorization header the page sends: the token it keeps in its origin's localStorage (read from the
    browser context, wherever the page is now)."""
    origin = server.rstrip("/")
    kept = [i["value"] for o in page.context.storage_state()["origins"] if o["origin"] == origin
            for i in o["localStorage"] if i["name"] == "uopviz-token"]
    assert kept, "the page keeps no token for this server"
    return {"Authorization": f"token {kept[0]}"}


def api(page: Page, server: str, path: str) -> Any:
    """GET /api/PATH as the page does (its token header), its JSON."""
    r = page.request.get(f"{server}api/{path}", headers=auth(page, server))
    assert r.ok, (path, r.status, r.text())
    return r.json()


def wait_drawn(page: Page, view: str) -> None:
    """Wait until the app reports the graph of view "trace/context/pass/step" drawn."""
    page.wait_for_function("v => document.querySelector('.uv-app')?.dataset.drawn === v", arg=view, timeout=60_000)


def gemm_context(page: Page, server: str) -> int:
    """The index of the zoo gemm's matmul kernel among its contexts, found by what it is (the kernel whose name says
    it reduces: r_...); the copy of B into panels (uopviz/schedule/pack.py) comes before it."""
    contexts = api(page, server, "traces/gemm")["contexts"]
    return next(c["index"] for c in contexts if c["kind"] == "kernel" and c["name"].startswith("r_"))

