"""`uopviz serve` or JupyterLab in a child process, as the browser tests and the benchmarks (bench/ui.py,
bench/widget.py) drive them, and the Chromium flags for headless runs on a machine without a network."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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
    with served_process(cache_dir, *args, start_timeout=start_timeout) as (url, _):
        yield url


@contextmanager
def served_process(cache_dir: str, *args: str, start_timeout: float = 120) \
        -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`served`, yielding the server's process too (a benchmark reads its memory)."""
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
        yield m.group(0), proc
    finally:
        timer.cancel()
        stop(proc)


def stop(proc: subprocess.Popen[str], timeout: float = 30) -> None:
    """Stop a child server that is still running with Ctrl-C (SIGINT), as a user would; kill it if it has not
    exited within `timeout` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@contextmanager
def jupyterlab(root: Path, start_timeout: float = 120) -> Iterator[str]:
    """JupyterLab on 127.0.0.1 at a free port without a token, serving the notebooks under `root`, with its own
    Jupyter config, data and runtime directories and tuning database (all under root/.state) and no update or news
    checks (no network); yields its base URL (`http://127.0.0.1:PORT/`); stopped with SIGTERM."""
    state = root / ".state"
    state.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "UOPVIZ_CACHE_DIR": str(state / "cache"), "JUPYTER_CONFIG_DIR": str(state / "config"),
           "JUPYTER_RUNTIME_DIR": str(state / "runtime"), "IPYTHONDIR": str(state / "ipython"),
           "JUPYTERLAB_SETTINGS_DIR": str(state / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces")}
    args = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
            f"--ServerApp.root_dir={root}", "--LabApp.news_url=", "--ServerApp.disable_check_xsrf=True",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
            "--ServerApp.terminals_enabled=False", "--allow-root"]  # root: CI runs as root, in a sandbox
    with open(state / "jupyterlab.log", "w") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with urllib.request.urlopen(base + "api/status", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise ServerStartError(f"JupyterLab did not start: {(state / 'jupyterlab.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield base
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
