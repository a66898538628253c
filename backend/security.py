"""Who may use the API and from where, and which files it may touch (issues 11, 28).

The API runs scripts and reads files, so `uopviz serve` guards it like JupyterLab does: a random token that
every API request must carry, as an `Authorization` header only. The token never travels where another local
process could pick it up: no cookie (cookies ignore ports, so one set by this server would reach every server
on the host), no query parameter, nothing on a command line. The page reads it from the printed URL's ?token=
in the browser, keeps it in its own origin's storage and sends it as the header; the page and its files hold
no data, so they need none. State-changing requests only from this server's own pages (Origin, Referer,
Sec-Fetch-Site) and only with a JSON body, since a cross-site `text/plain` POST needs no CORS preflight; on a
loopback address, only Host names that are loopback ones, so a page whose DNS name is rebound to 127.0.0.1
cannot talk to it. The checks are one ASGI middleware, written here rather than taken from framework defaults,
so that they hold across versions.

Files and scripts named in requests must lie (after resolving symlinks) under the directories the command line
allowed.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send
from uopviz.backend.models import ErrorBody

TOKEN_PARAM = "token"  # of the printed URL, which the page reads in the browser; the server takes no token there
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})  # a DELETE has no body, and needs a preflight cross-site
# Sec-Fetch-Site values of requests a page of this server made, or the user typed
OWN_FETCH_SITES = frozenset({"same-origin", "none"})
DEFAULT_PORTS = {"http": 80, "https": 443}
# a Host header: [IPv6] or a name, then an optional port (ASCII digits only: \d would take any Unicode digit)
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[^:\[\]/]+))(?::[0-9]{1,5})?")

NEED_TOKEN = ("this uopviz server needs its token: open the URL `uopviz serve` printed (it ends in ?token=...), "
              "or send the header `Authorization: token TOKEN`")


class Forbidden(PermissionError):
    """A file or script the server was not allowed to touch (answered as 403)."""


class BadPath(ValueError):
    """A path that no file can have, e.g. one with a NUL byte (answered as 422)."""


@dataclass(frozen=True)
class Access:
    """What the guard checks. token: the secret every API request must carry (None: `--no-token`); port: where
    the server listens; loopback: the server listens on a loopback address, so a request's Host must name one."""

    token: str | None
    port: int
    loopback: bool


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def loopback_host(host: str) -> bool:
    """Whether a Host header names a loopback address: localhost, 127.x.x.x or [::1], with or without a port."""
    m = _HOST.fullmatch(host)
    if m is None:
        return False
    if m["v6"] is not None:
        return _loopback_ip(m["v6"], 6)
    return m["name"].lower() == "localhost" or _loopback_ip(m["name"], 4)


def _loopback_ip(text: str, version: int) -> bool:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    return ip.version == version and ip.is_loopback


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL, the default port filled in; None for anything else (`null`, garbage)."""
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError:
        return None
    if u.scheme not in DEFAULT_PORTS or not u.hostname:
        return None
    return u.scheme, u.hostname, port or DEFAULT_PORTS[u.scheme]


def _cross_site(request: Request) -> str | None:
    """Why a state-changing request did not come from this server's own pages, or None if nothing says so.

    Browsers send Origin (else Referer) with such requests; a client that sends neither is not a browser page.
    """
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in OWN_FETCH_SITES:
        return f"Sec-Fetch-Site is {site}"
    own = _origin(f"{request.scope.get('scheme', 'http')}://{request.headers.get('host', '')}")
    for header in ("origin", "referer"):
        if (value := request.headers.get(header)) is not None:
            return None if own is not None and _origin(value) == own else f"its {header.title()} is another site"
    return None


def _json_body(request: Request) -> bool:
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    return media == "application/json"


def _matches(given: str, token: str) -> bool:
    return secrets.compare_digest(given.encode("utf-8", "replace"), token.encode())


def _presented(request: Request) -> str | None:
    """The token of a request's Authorization header (`token X` or `Bearer X`): the only place one is taken."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() in ("token", "bearer") else None


def is_api(path: str) -> bool:
    """API routes answer data; the rest (the page, its files, /docs and the schema) are the same for everyone."""
    return path == "/api" or path.startswith("/api/")


def error(status: int, detail: str, errors: list[Any] | None = None, headers: dict[str, str] | None = None
          ) -> JSONResponse:
    """An error answer, the same from the guard and from the routes: `{"detail": ..., "errors": [...]}`."""
    return JSONResponse(ErrorBody(detail=detail, errors=errors).model_dump(exclude_none=True), status_code=status,
                        headers=headers)


class Guard:
    """ASGI middleware that answers a request itself when it may not reach the app: a Host that is not a loopback
    name on a loopback server (400), a state-changing request from another site (403), an API request without
    the token in its Authorization header (401), a POST, PUT or PATCH whose body is not JSON (415)."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app, self.access = app, access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = self.check(Request(scope))
        await (self.app if answer is None else answer)(scope, receive, send)

    def check(self, request: Request) -> Response | None:
        """The answer to give instead of the app's, or None to pass the request on."""
        host = request.headers.get("host", "")
        if self.access.loopback and not loopback_host(host):
            return error(400, "this server listens on a loopback address and answers only requests for localhost, "
                              "127.x.x.x or [::1] (the Host header names another)")
        unsafe = request.method not in SAFE_METHODS
        if unsafe and (why := _cross_site(request)) is not None:
            return error(403, f"refused: a state-changing request from another site ({why})")
        token = self.access.token
        if token is not None and (unsafe or is_api(request.scope["path"])):
            given = _presented(request)
            if given is None or not _matches(given, token):
                return error(401, NEED_TOKEN, headers={"WWW-Authenticate": 'Bearer realm="uopviz"'})
        if request.method in BODY_METHODS and not _json_body(request):
            return error(415, "the body must be JSON, sent with Content-Type: application/json")
        return None


def confine(path: str, dirs: Sequence[Path], suffix: str | None = None) -> Path:
    """`path` with its symlinks resolved, if it lies under one of `dirs` (resolved) and, given a suffix, ends in
    it; else Forbidden, saying how to allow it. BadPath for a path no file can have."""
    if not dirs:
        raise Forbidden("this server reads no files and runs no scripts by request: start it with "
                        "`uopviz serve --allow-dir DIR` (or `uopviz serve FILE`, which allows FILE's directory) to "
                        "allow those under DIR")
    try:
        real = Path(path).resolve()
    except (OSError, ValueError, RuntimeError) as e:  # a NUL byte; RuntimeError: a symlink loop
        raise BadPath(f"{path!r} is not a usable path: {e}") from None
    if not any(real.is_relative_to(d) for d in dirs):
        raise Forbidden(f"{path}: not under a directory this server may read ({', '.join(map(str, dirs))}); "
                        "start it with `--allow-dir DIR` to allow another")
    if suffix is not None and real.suffix != suffix:
        raise Forbidden(f"{path}: scripts must be {suffix} files")
    return real
