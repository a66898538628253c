"""`uopviz serve` in a child process, as the browser tests and bench/ui.py drive it, and the Chromium flags for
headless runs on a machine without a network."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs

# Without the background-networking flags Chromium keeps reaching for Google's hosts, which a closed network
# refuses; --no-sandbox because tests run as root.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def base_and_token(url: str) -> tuple[str, str | None]:
    """A printed URL's base (`http://127.0.0.1:PORT/`, to which paths are appended) and its token (None without)."""
    base, _, query = url.partition("?")
    return base, parse_qs(query).get("token", [None])[0]


class ServerStartError(RuntimeError):
    """The child server did not print its URL."""


@contextmanager
def served(cache_dir: str, *args: str, start_timeout: float = 120) -> Iterator[str]:
    """Run `uopviz serve --no-browser --port 0 ARGS` (the zoo by default) with its own cache directory; yield the
    URL it printed (with its ?token=, unless ARGS has --no-token); stop it with Ctrl-C (SIGINT) as a user would."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "UOPVIZ_CACHE_DIR": cache_dir}
    proc = subprocess.Popen([sys.executable, "-m", "uopviz.cli", "serve", "--no-browser", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    timer = threading.Timer(start_timeout, proc.kill)  # a server that never comes up fails instead of hanging
    timer.start()
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        timer.cancel()
        m = re.search(r"http://\S+", line)
        if not m:
            proc.kill()
            _, err = proc.communicate()
            raise ServerStartError(f"uopviz serve printed {line!r}; stderr: {err}")
        yield m.group(0)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
