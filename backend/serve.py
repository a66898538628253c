"""`uopviz serve`: fill a TraceStore (the zoo, or the given trace files and scripts), then run the app under
uvicorn until Ctrl-C, guarded by a token made at start (printed in the URL)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import sys
import threading
import webbrowser
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

import uvicorn

from backend.app import create_app
from backend.recording import RecordError
from backend.security import TOKEN_PARAM, Access, new_token
from backend.store import TraceStore


class _Server(uvicorn.Server):
    """A uvicorn server that says when it is listening (so the URL is printed only once it answers), and on
    Ctrl-C first stops what would keep it from stopping: uvicorn waits for open responses before it shuts the
    app down, and a BEAM progress stream stays open until its search ends."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None], on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_ready, self._on_exit = on_ready, on_exit

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_ready()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)


def fill(store: TraceStore, files: Sequence[str]) -> None:
    """Load each trace file and run each script (`.py`) under the recorder; with none, record the zoo."""
    if not files:
        store.record_whole_zoo()
    for f in files:
        if f.endswith(".py"):
            store.record_script(f)
        else:
            store.load_file(f)


def _open_browser(url: str) -> None:
    """Open the URL in a GUI browser. On Linux without a display (over SSH, say) do nothing: webbrowser would
    start a console browser in this very terminal."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return
    webbrowser.open(url)


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

    def ready() -> None:
        n = len(store)
        print(f"uopviz: serving {n} trace{'' if n == 1 else 's'} at {url}  (Ctrl-C to stop)", flush=True)
        if browser:
            threading.Thread(target=_open_browser, args=(url,), daemon=True).start()

    # uvicorn shuts down on SIGINT, then raises it again (when asyncio lets it through: not always)
    with contextlib.suppress(KeyboardInterrupt):
        _Server(uvicorn.Config(app, log_level="warning"), ready, lambda: app.state.beams.stop(wait=False)).run(
            sockets=[sock])
    print("uopviz: stopped", flush=True)
    return 0
