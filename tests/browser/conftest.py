"""Browser tests: `uopviz serve` (the kernel zoo) in a child process, driven by Python Playwright in Debian's
Chromium (Playwright cannot download its own browsers here). Every page first opens the URL the server printed,
as a user does, so that it keeps the token (in its origin's localStorage). Screenshots go to test-artifacts/browser/."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from uopviz.backend.child import CHROMIUM_ARGS, base_and_token, served

from tests.browser.support import server_cache

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "browser"


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`uopviz serve --no-browser --port 0`: records the zoo, prints its URL (with its token), which this yields;
    stopped with Ctrl-C (SIGINT). Its compiled libraries are shared with the other modules' servers (server_cache)."""
    with served(str(server_cache(tmp_path_factory))) as url:
        yield url


@pytest.fixture(scope="module")
def server(printed: str) -> str:
    """The server's URL without its token (`http://127.0.0.1:PORT/`), to which tests append paths and views."""
    return base_and_token(printed)[0]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs Python Playwright (pip install playwright)")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("needs Chromium on PATH (apt-get install chromium; `./dev setup` installs it when run as root)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, printed: str, server: str) -> Iterator[Page]:
    """A fresh page (1600x950) that has opened the printed URL (so it keeps the token, and has taken it out of its
    address); the test fails if the page threw or logged an error."""
    pg = browser.new_page(viewport={"width": 1600, "height": 950})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    pg.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" and not expected(m.text)
          else None)
    log_in(pg, printed, server)
    yield pg
    pg.close()
    assert not errors, errors


def log_in(page: Page, printed: str, server: str) -> None:
    """Open the URL `uopviz serve` printed, as a user does: the page takes the token out of its URL and draws its
    first view. Then leave it, so that a test's first page load is a fresh one, as before the token."""
    page.goto(printed)
    assert page.url.partition("#")[0] == server, page.url
    page.wait_for_function("() => document.querySelector('.uv-app')?.dataset.drawn")
    page.goto("about:blank")


def expected(text: str) -> bool:
    """Chromium logs every 4xx answer; a 422 for an illegal opt is one the tests ask for."""
    return "status of 422" in text


@pytest.fixture(scope="session")
def shots() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
