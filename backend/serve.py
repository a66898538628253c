"""`uopviz serve`: fill a TraceStore (the zoo, or the given trace files and scripts), then run the app under
uvicorn until Ctrl-C, guarded by a token made at start (printed in the URL, and given to the browser in a private
file, never on a command line, where every local user could read it in /proc)."""

from __future__ import annotations

import contextlib
import html
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import webbrowser
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

import uvicorn
from uopviz.backend import device_list
from uopviz.backend.app import create_app
from uopviz.backend.recording import RecordError
from uopviz.backend.security import TOKEN_PARAM, Access, new_token
from uopviz.backend.store import TraceStore

STOP_GRACE_S = 5.0  # after Ctrl-C, how long requests and a BEAM search get to end before the server stops anyway
# Opens the browser from a grandchild whose parent has exited, so that the browser is no process of the server's
# (Ctrl-C ends every process under the server); argv[1] is the page to open.
_OPENER = "import os, sys, webbrowser\nif os.fork() == 0:\n    webbrowser.open(sys.argv[1])\n"
LAUNCH_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={attr}">
<title>uopviz</title></head>
<body><p><a href="{attr}">Open uopviz</a></p><script>location.replace({js});</script></body></html>
"""


class _Server(uvicorn.Server):
    """A uvicorn server that says when it is listening (so the URL is printed only once it answers), and on
    Ctrl-C first stops what would keep it from stopping: uvicorn waits for open responses before it shuts the
    app down, a BEAM progress stream stays open until its search ends, and a request waits for its compiler."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None], on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready, self._on_exit = on_ready, on_exit

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_ready()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.should_exit:
            self._on_exit()
        super().handle_exit(sig, frame)


def _children() -> dict[int, list[int]]:
    """The live (not zombie) processes of the machine by parent pid: /proc where there is one, else ps; {} where
    neither says."""
    kids: dict[int, list[int]] = {}
    if os.path.isdir("/proc"):
        for name in os.listdir("/proc"):
            try:
                stat = Path("/proc", name, "stat").read_text() if name.isdigit() else ""
            except OSError:  # it has ended
                continue
            fields = stat.rpartition(")")[2].split()  # after "pid (comm)", which may hold anything
            if len(fields) > 1 and fields[0] != "Z":
                kids.setdefault(int(fields[1]), []).append(int(name))
        return kids
    try:
        out = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,stat="], capture_output=True, text=True, timeout=5,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return kids
    for line in out.splitlines():
        pid, ppid, state = [*line.split(), ""][:3]
        if pid.isdigit() and ppid.isdigit() and not state.startswith("Z"):
            kids.setdefault(int(ppid), []).append(int(pid))
    return kids


def descendants(spare: int | None = None) -> list[int]:
    """The processes this one started and theirs (compilers, objdump, a script's runner, a BEAM search and its
    workers), less `spare` and those under it."""
    kids, out = _children(), []
    todo = list(kids.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        if pid != spare:
            out.append(pid)
            todo.extend(kids.get(pid, []))
    return out


def kill_descendants(spare: int | None = None) -> None:
    """SIGKILL every process under this one but `spare`'s tree, all at once from one look (a parent killed first
    would leave its children to init), and again while any is left (a dying parent may have started another)."""
    for _ in range(5):
        pids = descendants(spare)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def fill(store: TraceStore, files: Sequence[str]) -> None:
    """Load each trace file and run each script (`.py`) under the recorder; with none, record the zoo."""
    if not files:
        store.record_whole_zoo()
    for f in files:
        if f.endswith(".py"):
            store.record_script(f)
        else:
            store.load_file(f)


def _open_browser(page: str) -> None:
    """Open a page in a GUI browser. On Linux without a display (over SSH, say) do nothing: webbrowser would
    start a console browser in this very terminal."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return
    if os.name != "posix":
        webbrowser.open(page)
        return
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", _OPENER, page], stdin=subprocess.DEVNULL, start_new_session=True,
                       timeout=30, check=False)


def launch_page(url: str) -> Path:
    """A page that sends the browser on to `url` (which holds the token), made for this start only: 0600 in a
    folder of its own (0700), so that what goes on the browser's command line is its path, which tells no one
    the token. Jupyter opens its browser the same way; the caller removes the folder when the server stops."""
    folder = Path(tempfile.mkdtemp(prefix="uopviz-open-"))
    page = folder / "open.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(LAUNCH_PAGE.format(attr=html.escape(url), js=json.dumps(url).replace("<", "\\u003c")))
    return page


def _listen(host: str, port: int) -> socket.socket:
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def allowed_dirs(files: Sequence[str], allow_dirs: Sequence[str]) -> list[Path]:
    """The directories whose files requests may name: each served file's, and each --allow-dir (resolved);
    NotADirectoryError for an --allow-dir that is not a directory."""
    for d in allow_dirs:
        if not Path(d).is_dir():
            raise NotADirectoryError(f"--allow-dir {d}: no such directory")
    return sorted({Path(f).resolve().parent for f in files} | {Path(d).resolve() for d in allow_dirs})


def _loopback(sock: socket.socket) -> bool:
    """Whether the socket listens on a loopback address only (127.x.x.x, ::1), which Host checks then guard."""
    return ipaddress.ip_address(sock.getsockname()[0].partition("%")[0]).is_loopback


def serve(files: Sequence[str], host: str = "127.0.0.1", port: int = 8000, db: str | None = None,
          browser: bool = True, device: str | None = None, token: bool = True,
          allow_dirs: Sequence[str] = ()) -> int:
    """Serve until Ctrl-C. `token`: require the token printed in the URL (False: --no-token); `allow_dirs`: the
    directories, besides those of `files`, whose files and scripts requests may name. Exit status: 0 after
    Ctrl-C, 2 for a file, directory or device that cannot be served, 1 if the address cannot be bound, 130 if
    interrupted while loading."""
    try:
        dirs = allowed_dirs(files, allow_dirs)
    except NotADirectoryError as e:
        print(f"uopviz: {e}", file=sys.stderr)
        return 2
    device_list.start()  # a child lists the devices while the traces load, not as the page first asks
    try:
        store = TraceStore(device)
        fill(store, files)
    except (FileNotFoundError, RecordError) as e:
        print(f"uopviz: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    try:
        sock = _listen(host, port)
    except (OSError, OverflowError) as e:  # OverflowError: a port outside 0..65535
        why = getattr(e, "strerror", None) or e
        print(f"uopviz: cannot listen on {host}:{port}: {why}; pick another --port (0: any free one)", file=sys.stderr)
        return 1
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # where a browser on this machine finds it
    shown = f"[{shown}]" if ":" in shown else shown
    access = Access(new_token() if token else None, sock.getsockname()[1], _loopback(sock))
    url = f"http://{shown}:{access.port}/" + (f"?{TOKEN_PARAM}={access.token}" if access.token else "")
    if not access.loopback:
        print(f"uopviz: warning: listening on {host}: whoever reaches this address can read the traces and run "
              "scripts on this machine through the API" + (" if they learn the token" if token else ""),
              file=sys.stderr)
    if not token:
        print("uopviz: warning: --no-token: every local user and every program on this machine can use the API, "
              "which runs scripts and reads files", file=sys.stderr)
    app = create_app(store, db=Path(db).resolve() if db else None, access=access, allow_dirs=dirs)
    beams = app.state.beams
    opened: list[Path] = []  # the launch page's folder, once made

    def ready() -> None:
        n = len(store)
        print(f"uopviz: serving {n} trace{'' if n == 1 else 's'} at {url}  (Ctrl-C to stop)", flush=True)
        if browser:
            page = launch_page(url) if access.token else None
            if page is not None:
                opened.append(page.parent)
            threading.Thread(target=_open_browser, args=(page.as_uri() if page else url,), daemon=True).start()

    def stop_anyway() -> None:
        """The grace is over and something still runs (a request computing, a search not ending): end it all."""
        kill_descendants()
        for folder in opened:
            shutil.rmtree(folder, ignore_errors=True)
        print("uopviz: stopped", flush=True)
        os._exit(0)  # a request's thread that is still computing would keep the interpreter from exiting

    deadline = threading.Timer(STOP_GRACE_S, stop_anyway)
    deadline.daemon = True

    def on_exit() -> None:
        """Ctrl-C: ask the search to stop (it keeps what it measured), end every other process under this one (a
        compiler, objdump, a script), so the requests waiting on them answer at once; stop anyway after the grace."""
        beams.stop(wait=False)
        kill_descendants(spare=beams.pid)
        deadline.start()

    try:
        # uvicorn shuts down on SIGINT, then raises it again (when asyncio lets it through: not always)
        with contextlib.suppress(KeyboardInterrupt):
            _Server(uvicorn.Config(app, log_level="warning"), ready, on_exit).run(sockets=[sock])
        kill_descendants()  # a search's worker that outlived it
    finally:
        deadline.cancel()
        for folder in opened:
            shutil.rmtree(folder, ignore_errors=True)
    print("uopviz: stopped", flush=True)
    return 0
