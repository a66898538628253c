"""What another local user can do to find a `uopviz serve`'s token or to plant code, written to run as that user:
standard library only, so that any Python the user may run can run it (`python -I other_user.py ACTION`, a JSON
request on stdin, a JSON answer on stdout). test_two_users.py runs it as uid 65534 (nobody) beside a server of
root's; the test hands it the token on stdin (never on its command line, which every user may read) only so that
it can say where it found it. command_lines is also how test_token_private reads every command line."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import queue
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

READ_LIMIT = 16 << 20  # bytes read of one file: what the server could have written is far smaller
LAUNCH_PREFIX = "uopviz-open-"  # the launch page's folder (backend.serve.launch_page)


def command_lines() -> dict[int, str]:
    """Every process's command line, as any local user may read it."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):  # it has ended
                out[int(name)] = Path("/proc", name, "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    "utf-8", "replace")
    return out


def process_tree(pid: int) -> list[int]:
    """pid and the processes under it, from /proc (each process's stat says its parent)."""
    kids: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError, ValueError):  # it has ended
            ppid = int(Path("/proc", name, "stat").read_text().rpartition(")")[2].split()[1])
            kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def read_environ(pid: int | str) -> str | bytes:
    """A process's environment as this user reads it: its bytes, or "unreadable" or "gone"."""
    try:
        return Path("/proc", str(pid), "environ").read_bytes()
    except PermissionError:
        return "unreadable"
    except OSError:
        return "gone"


def look_in_proc(req: dict[str, Any]) -> dict[str, Any]:
    """Every command line and every environment this user can read: where the token is, how many were read, and
    how each of the server's processes' environments read."""
    token, server = req["token"], req["server_pid"]
    lines = command_lines()
    envs = {int(n): read_environ(n) for n in os.listdir("/proc") if n.isdigit()}
    return {"uid": os.getuid(), "cmdlines_read": len([c for c in lines.values() if c]),
            "server_cmdline": lines.get(server, ""),
            "cmdline_hits": {pid: c for pid, c in lines.items() if token in c},
            "environs_read": len([e for e in envs.values() if isinstance(e, bytes)]),
            "own_environ_read": isinstance(read_environ("self"), bytes),
            "environ_hits": [pid for pid, e in envs.items() if isinstance(e, bytes) and token.encode() in e],
            "server_environs": {pid: e if isinstance(e, str) else "read" for pid, e in
                                ((p, read_environ(p)) for p in process_tree(server))}}


def _read(path: str) -> bytes | str:
    """A file's bytes (up to READ_LIMIT) as this user reads them, or why not: "unreadable", "not a file", "gone".
    Not through a link, and O_NONBLOCK, so that a FIFO is not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except PermissionError:
        return "unreadable"
    except OSError:
        return "gone"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a file"
        chunks, left = [], READ_LIMIT
        while left and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return "unreadable"
    finally:
        os.close(fd)


def look_in_files(req: dict[str, Any]) -> dict[str, Any]:
    """Every file under the given folders that this user can read and that changed since `since` (a shared /tmp
    holds far more that no server of this start wrote), and what this user gets of each launch-page folder in the
    folders' top level (its listing, its open.html): which of the texts asked for (name -> text) each holds.
    One walk for every text, four threads entering folders: a cold shared /tmp of 1.5 million entries took 50 s
    walked one folder at a time, nearly all of it waiting on the disk (14 s with four threads)."""
    texts = {name: text.encode() for name, text in req["texts"].items()}
    since = req["since"]
    hits: dict[str, list[str]] = {name: [] for name in texts}
    counts = {"read": 0, "unreadable": 0}
    lock = threading.Lock()

    def look(path: str, data: bytes | str) -> None:
        with lock:
            if isinstance(data, bytes):
                counts["read"] += 1
                for name, text in texts.items():
                    if text in data:
                        hits[name].append(path)
            elif data == "unreadable":
                counts["unreadable"] += 1

    def visit(folder: str) -> list[str]:
        """Look in the folder's files; its subfolders, for the pool to enter."""
        try:
            entries = list(os.scandir(folder))
        except OSError:
            look(folder, "unreadable")
            return []
        below = []
        for e in entries:
            with contextlib.suppress(OSError):
                if e.is_dir(follow_symlinks=False):
                    below.append(e.path)
                elif e.stat(follow_symlinks=False).st_ctime >= since:
                    look(e.path, _read(e.path))
        return below

    folders: queue.Queue[str] = queue.Queue()

    def enter() -> None:
        while True:
            folder = folders.get()
            try:
                for below in visit(folder):
                    folders.put(below)
            finally:
                folders.task_done()

    for top in req["folders"]:
        folders.put(top)
    for _ in range(4):
        threading.Thread(target=enter, daemon=True).start()
    folders.join()

    launch: dict[str, dict[str, Any]] = {}
    for top in req["folders"]:
        with contextlib.suppress(OSError):
            for name in os.listdir(top):
                if name.startswith(LAUNCH_PREFIX):
                    folder = os.path.join(top, name)
                    try:
                        listing: list[str] | str = os.listdir(folder)
                    except PermissionError:
                        listing = "unreadable"
                    except OSError:
                        listing = "gone"
                    page = _read(os.path.join(folder, "open.html"))
                    launch[folder] = {"listing": listing, "page": "read" if isinstance(page, bytes) else page}
                    look(os.path.join(folder, "open.html"), page)
    return {"uid": os.getuid(), "hits": hits, **counts, "launch": launch}


def _request(base: str, method: str, path: str, headers: dict[str, str], body: bytes | None = None
             ) -> dict[str, Any]:
    host, _, port = base.split("/")[2].rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=20)
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        return {"status": r.status, "cookies": r.headers.get_all("Set-Cookie") or [], "body": r.read(1 << 20)}
    finally:
        conn.close()


def ask_the_api(req: dict[str, Any]) -> dict[str, Any]:
    """Every API route of the server's own schema (which needs no token), each method, asked with no token and with
    wrong ones; and the page and its schema, which need none: each answer's status, the cookies it sets, and
    whether it holds the token."""
    token, base, fill = req["token"], req["base"], req["params"]
    near = token[:-1] + ("A" if token[-1] != "A" else "B")  # all but its last character
    tries = {"none": {}, "wrong": {"Authorization": "token " + "x" * len(token)},
             "wrong bearer": {"Authorization": "Bearer " + "x" * len(token)},
             "one character off": {"Authorization": "token " + near}, "empty": {"Authorization": "token "}}
    schema = json.loads(_request(base, "GET", "/openapi.json", {})["body"])
    routes = [(method.upper(), path) for path, ops in schema["paths"].items() for method in ops]
    answers = []
    for method, path in [*routes, ("GET", "/api"), ("GET", "/api/nothing")]:
        url = path.format(**fill)
        for how, headers in tries.items():
            body = b"{}" if method in ("POST", "PUT", "PATCH") else None
            h = {**headers, **({"Content-Type": "application/json"} if body is not None else {})}
            r = _request(base, method, url, h, body)
            answers.append({"method": method, "path": url, "how": how, "status": r["status"], "cookies": r["cookies"],
                            "token": token.encode() in r["body"]})
    pages = []
    for path in ["/", "/?token=" + near, "/app.js", "/docs", "/openapi.json"]:
        r = _request(base, "GET", path, {})
        pages.append({"path": path, "status": r["status"], "cookies": r["cookies"],
                      "token": token.encode() in r["body"]})
    return {"uid": os.getuid(), "routes": routes, "answers": answers, "pages": pages}


def listen(req: dict[str, Any]) -> dict[str, Any]:
    """This user's own server on a free port of 127.0.0.1: it prints the port (one line), writes down every
    request's line and headers until stdin closes, then answers them."""
    seen: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(f"{self.requestline}\n{self.headers}")
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"another user's server")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_port, flush=True)
    sys.stdin.read()
    server.shutdown()
    server.server_close()
    return {"uid": os.getuid(), "seen": seen}


def plant(req: dict[str, Any]) -> dict[str, Any]:
    """What the attacker of issue 28 does in a shared folder: make the cache folder (mode req["mode"]) before the
    victim does, and put a library of its own in it under the name the victim's kernel has, with the digest beside
    it that matches."""
    cache = Path(req["cache"])
    data = Path(req["library"]).read_bytes()
    for folder in (cache, cache / "cpu"):
        folder.mkdir()
        folder.chmod(req["mode"])
    lib = cache / "cpu" / req["name"]
    lib.write_bytes(data)
    lib.with_suffix(".sha256").write_text(hashlib.sha256(data).hexdigest())
    return {"uid": os.getuid(), "owners": sorted({p.stat().st_uid for p in (cache, *cache.rglob("*"))})}


ACTIONS = {"proc": look_in_proc, "files": look_in_files, "api": ask_the_api, "listen": listen, "plant": plant}

if __name__ == "__main__":
    start = time.monotonic()
    request = json.loads(sys.stdin.readline())
    answer = ACTIONS[sys.argv[1]](request)
    print(json.dumps({**answer, "seconds": round(time.monotonic() - start, 2)}), flush=True)
