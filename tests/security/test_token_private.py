"""Issue 28, item 3: the token stays private. `uopviz serve` opens the browser on a page of its own (0600, in a
folder only its user may enter, removed when it stops) that sends the browser on to the printed URL, so what goes
on the browser's command line, which every local user may read in /proc, is that file's path, never the token; and
no answer sets a cookie, which the browser would send to every other port of the host (so to another user's
server there)."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from other_user import command_lines
from uopviz.backend.child import base_and_token, stop
from uopviz.backend.serve import launch_page


def test_the_browser_is_opened_on_a_private_page_not_on_the_token(
        opened: tuple[dict[str, Any], str, subprocess.Popen[str]]) -> None:
    seen, printed, proc = opened
    base, token = base_and_token(printed)
    assert token is not None
    assert not any(token in arg for arg in seen["argv"]), seen["argv"]
    assert not [cmd for cmd in command_lines().values() if token in cmd]  # no process shows it to other users
    page = Path(seen["page"])
    assert page.name == "open.html" and page.parent.name.startswith("uopviz-open-")
    assert (seen["mode"], seen["folder_mode"]) == (0o600, 0o700)
    assert seen["owner"] == seen["folder_owner"] == os.getuid()
    assert f'url={base}?token={token}"' in seen["text"] and f'location.replace("{base}?token={token}")' in seen["text"]
    assert httpx.get(base + "api/traces", headers={"Authorization": f"token {token}"}, timeout=10).status_code == 200
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert not page.parent.exists()  # one start's page, gone with the server


def test_the_launch_page_escapes_what_it_is_given() -> None:
    page = launch_page('http://127.0.0.1:1/?token=a"b</script><b>')
    try:
        text = page.read_text()
        assert "<b>" not in text and "</script><b>" not in text
        assert stat.S_IMODE(page.stat().st_mode) == 0o600 and stat.S_IMODE(page.parent.stat().st_mode) == 0o700
    finally:
        page.unlink()
        page.parent.rmdir()


def test_no_answer_of_a_running_server_sets_a_cookie(trace_file: Path, tmp_path: Path) -> None:
    """What another user's server on another port of 127.0.0.1 could receive from the browser: cookies, which
    browsers send to every port of a host. The server sets none, on the page opened with the printed URL or any
    API answer, so there is nothing to receive."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "UOPVIZ_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "uopviz.cli", "serve", "--no-browser", "--port", "0",
                             str(trace_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        printed = re.search(r"http://\S+", line)
        assert printed, line
        base, token = base_and_token(printed.group(0))
        auth = {"Authorization": f"token {token}"}
        answers = [httpx.get(printed.group(0), timeout=10), httpx.get(base + "app.js", timeout=10),
                   httpx.get(base + "api/traces", headers=auth, timeout=10),
                   httpx.get(base + "api/traces", params={"token": token}, timeout=10),
                   httpx.get(base + "api/traces/max/contexts/1/kernel", headers=auth, timeout=10)]
        assert [r.status_code for r in answers] == [200, 200, 200, 401, 200]
        assert not [r.headers.get_list("set-cookie") for r in answers if r.headers.get_list("set-cookie")]
        assert token not in answers[0].text  # the page does not write the token into itself
    finally:
        stop(proc)
