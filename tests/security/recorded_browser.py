"""`uopviz serve` started with a browser to open (a display, and $BROWSER a recorder that writes down how it was
started and what the page it was given holds), for test_token_private.py and test_two_users.py (conftest.py's
`opened` fixture)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from uopviz.backend.child import stop

RECORDER = """#!{python}
# a browser for the tests: it writes down how it was started and what the page it was given holds, then stays
# open for `linger` seconds, as a browser does, unless the test ends it first (its pid is in what it wrote)
import json, os, stat, sys, time
from urllib.parse import unquote, urlsplit
info = {{"argv": sys.argv, "pid": os.getpid()}}
if sys.argv[-1].startswith("file:"):
    page = unquote(urlsplit(sys.argv[-1]).path)
    info.update(page=page, text=open(page).read(), mode=stat.S_IMODE(os.stat(page).st_mode),
                folder_mode=stat.S_IMODE(os.stat(os.path.dirname(page)).st_mode), owner=os.stat(page).st_uid,
                folder_owner=os.stat(os.path.dirname(page)).st_uid)
with open({out!r} + ".tmp", "w") as f:
    json.dump(info, f)
os.replace({out!r} + ".tmp", {out!r})
time.sleep({linger})
"""

Opened = tuple[dict[str, Any], str, subprocess.Popen[str]]


@contextmanager
def serve_with_browser(trace: Path, folder: Path, linger: bool = False) -> Iterator[Opened]:
    """`uopviz serve --port 0 TRACE` with a browser to open (its files, the cache and the recorder's, in `folder`):
    what the recorder saw, once the browser is open, the URL the server printed, and the server. `linger`: the
    browser stays open (its process, and the opener's waiting on it, hold the server's output open: the browser
    is ended first, then the server is stopped with Ctrl-C, backend.child.stop, unless the test stopped it)."""
    seen = folder / "browser.json"
    browser = folder / "browser"
    browser.write_text(RECORDER.format(python=sys.executable, out=str(seen), linger=300 if linger else 0))
    browser.chmod(0o755)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "UOPVIZ_CACHE_DIR": str(folder / "cache"), "DISPLAY": ":99",
           "BROWSER": str(browser)}
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.Popen([sys.executable, "-m", "uopviz.cli", "serve", "--port", "0", str(trace)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    timer = threading.Timer(180, proc.kill)
    timer.start()
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        m = re.search(r"http://\S+", line)
        assert m, line
        end = time.monotonic() + 60
        while not seen.exists():
            assert time.monotonic() < end and proc.poll() is None, "the browser was never opened"
            time.sleep(0.05)
        timer.cancel()  # started: the tests that use it may take minutes (the other user's walk of a shared /tmp)
        yield json.loads(seen.read_text()), m.group(0), proc
    finally:
        timer.cancel()
        if linger and seen.exists():  # the browser is no process of the server's: it would stay open after it
            with contextlib.suppress(ProcessLookupError):
                os.kill(json.loads(seen.read_text())["pid"], signal.SIGKILL)
        stop(proc)
