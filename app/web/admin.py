"""Who is the admin: one rule for every admin page and route (test designer, results, shared voices).

Why one module: the listening tests, the voice library and the reports all need the same answer,
and a public Space must never get it wrong in one place.

* ``LISTENLAB_ADMIN_PASSWORD`` set: a request is admin when it carries the password
  (``Authorization: Bearer PW`` or HTTP Basic with any user name) or the signed ``ll_admin``
  cookie that :func:`login_cookie` makes after a correct password.
* not set: only requests from the machine itself are admin (a loopback client with no
  ``X-Forwarded-For``/``Forwarded`` header, so a reverse proxy on the same host does not make
  every visitor an admin). Pages say so.

Guessing is slowed per client (:class:`LoginThrottle`, the client as :class:`app.web.proxies.Proxies`
sees it): after a few wrong passwords (on the login form or in an ``Authorization`` header)
that client's next tries are refused unchecked (429, ``Retry-After``) for a delay that doubles
with each further failure, so even the right password waits. With several replicas on one
PostgreSQL database the failures are counted there (``login_failures``), so moving to another
replica does not reset them. The cookie is ``Secure`` whenever
the browser's request came over TLS (directly or through a trusted proxy, as on a Space).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import html
import ipaddress
import secrets
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel
from starlette.background import BackgroundTask
from starlette.requests import HTTPConnection

from app.config import ENV_ADMIN_PASSWORD, WebSettings
from app.web.openapi import DeclaredRoute, answer, errors, media, ok
from app.web.proxies import Proxies
from app.web.ratelimit import FailureTally, LoginThrottle
from backends.errors import Forbidden, TooMany

ENV_PASSWORD = ENV_ADMIN_PASSWORD
COOKIE = "ll_admin"
COOKIE_MAX_AGE_S = 12 * 3600
PROXY_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")


@dataclass(frozen=True)
class Attempt:
    ok: bool
    retry_after_s: float = 0.0
    """> 0: the password was not checked (too many wrong ones from this client)."""


class TooManyTries(TooMany):
    def __init__(self, wait_s: float):
        w = max(1, int(wait_s + 0.999))
        super().__init__(
            f"too many wrong admin passwords from your address: try again in {w} s",
            retry_after_s=w,
        )


@dataclass(frozen=True)
class AdminPolicy:
    """The password (or None: localhost only) and the key that signs admin cookies.

    The key is random per process unless ``LISTENLAB_SECRET_KEY`` is set, so cookies die with
    a restart rather than outliving a changed password.
    """

    password: str | None
    key: bytes
    proxies: Proxies = field(default_factory=Proxies.from_env)
    throttle: LoginThrottle = field(default_factory=LoginThrottle, compare=False)

    @classmethod
    def from_env(
        cls,
        proxies: Proxies | None = None,
        tally: FailureTally | None = None,
        settings: WebSettings | None = None,
    ) -> AdminPolicy:
        """From the app's settings (read once), else the environment's now. ``tally``: where
        wrong passwords are counted when it is not this process's memory (the shared
        database of several replicas)."""
        web = settings if settings is not None else WebSettings.from_env()
        key = web.secret_key
        secret = key.encode() if key else secrets.token_bytes(32)
        return cls(
            web.admin_password,
            secret,
            proxies if proxies is not None else Proxies.from_env(web),
            LoginThrottle(tally=tally),
        )

    @property
    def mode(self) -> str:
        """``password`` or ``localhost``: what the admin pages tell the user."""
        return "password" if self.password else "localhost"

    def describe(self) -> str:
        if self.password:
            # the password is set on the server: say how to give it, never to set it
            return (
                "Admin pages need the password this server was started with: enter it in the "
                "form, or send it as 'Authorization: Bearer PASSWORD' (listenlab's CLI sends "
                f"the {ENV_PASSWORD} of its own environment)."
            )
        return (
            "No LISTENLAB_ADMIN_PASSWORD is set: admin pages answer only requests from this "
            "machine (localhost). Set it to administer a public deployment."
        )

    # -- checks

    def password_ok(self, given: str | None) -> bool:
        if not self.password or given is None:
            return False
        return hmac.compare_digest(given.encode(), self.password.encode())

    def attempt(self, conn: HTTPConnection, given: str | None, now: float | None = None) -> Attempt:
        """Check a password from this client, unless it must wait (then it is not checked)."""
        now = time.time() if now is None else now
        key = self.proxies.client_key(conn.scope)
        wait = self.throttle.wait_s(key, now)
        if wait > 0:
            return Attempt(False, wait)
        if self.password_ok(given):
            self.throttle.succeeded(key)
            return Attempt(True)
        self.throttle.failed(key, now)
        return Attempt(False)

    def login_cookie(self, now: float | None = None) -> str:
        """A cookie value that proves a correct password was given (expires, signed)."""
        expires = int((now or time.time()) + COOKIE_MAX_AGE_S)
        sig = self._sign(str(expires))
        return f"{expires}.{sig}"

    def cookie_ok(self, value: str | None, now: float | None = None) -> bool:
        if not value or "." not in value:
            return False
        expires, _, sig = value.partition(".")
        if not expires.isdigit() or int(expires) < (now or time.time()):
            return False
        return hmac.compare_digest(sig, self._sign(expires))

    def is_admin(self, conn: HTTPConnection) -> bool:
        """True when this request (or WebSocket) may use admin pages and routes."""
        if self.password:
            if self.cookie_ok(conn.cookies.get(COOKIE)):
                return True
            given = _presented_password(conn)
            return given is not None and self.attempt(conn, given).ok
        return is_local(conn)

    def require(self, conn: HTTPConnection) -> None:
        """Raise 403 (with the reason) unless the request is admin; 429 while this client
        must wait after wrong passwords."""
        if self.is_admin(conn):
            return
        if self.password and _presented_password(conn) is not None:
            wait = self.throttle.wait_s(self.proxies.client_key(conn.scope), time.time())
            if wait > 0:
                raise TooManyTries(wait)
        raise Forbidden(f"admin only. {self.describe()}")

    def cookie_secure(self, conn: HTTPConnection) -> bool:
        """Mark cookies ``Secure`` when the browser reached us over TLS."""
        return self.proxies.is_tls(conn.scope)

    def _sign(self, msg: str) -> str:
        # the password is part of the key: changing it invalidates every cookie
        key = self.key + (self.password or "").encode()
        return hmac.new(key, msg.encode(), hashlib.sha256).hexdigest()


def _presented_password(conn: HTTPConnection) -> str | None:
    auth = conn.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2]
    return None


def is_local(conn: HTTPConnection) -> bool:
    """A direct loopback client, not one relayed by a proxy on this machine."""
    if any(h in conn.headers for h in PROXY_HEADERS):
        return False
    host = conn.client.host if conn.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "testclient"  # starlette's TestClient


def policy(request: Request | HTTPConnection) -> AdminPolicy:
    """The app's policy (made at app creation), so tests can set the env per app."""
    pol = getattr(request.app.state, "admin_policy", None)
    if pol is None:
        pol = AdminPolicy.from_env()
        request.app.state.admin_policy = pol
    return pol


def require_admin(request: Request) -> None:
    """FastAPI dependency: ``dependencies=[Depends(require_admin)]``."""
    policy(request).require(request)


# --------------------------------------------------------------------------- routes

router = APIRouter(route_class=DeclaredRoute)
ADMIN_ONLY = errors(Forbidden, TooManyTries)
"""Not an admin (403), or a client that gave too many wrong passwords (429)."""


@dataclass(frozen=True)
class LoggedIn:
    """``POST /ll/admin/login``: the password was right; the answer carries the admin cookie."""

    admin: Literal[True]


class Whoami(BaseModel):
    """``GET /ll/admin/whoami``: whether this request is the admin's, and how one becomes it."""

    admin: bool
    mode: Literal["password", "localhost"]
    note: str


def login_page(note: str) -> str:
    """The admin login form (posts to ``/ll/admin/login``, then reloads). If the login did not
    stick (a browser that keeps no cookie in a page framed by another site, as huggingface.co
    frames a Space), it says so and links to the page on its own."""
    return (
        "<!doctype html><meta charset=utf-8><title>listenlab admin</title>"
        "<body style='font-family:system-ui;max-width:34rem;margin:3rem auto'>"
        "<h1>Admin only</h1><p id=note>" + html.escape(note) + "</p>"
        "<form id=f><input type=password name=password placeholder='admin password' "
        "autocomplete=current-password> <button>Log in</button></form><p id=msg></p>"
        "<script>document.getElementById('f').onsubmit=async(e)=>{e.preventDefault();"
        "const msg=document.getElementById('msg');"
        "const r=await fetch('/ll/admin/login',{method:'POST',body:new FormData(e.target)});"
        "if(r.ok){const w=await (await fetch('/ll/admin/whoami')).json();"
        "if(w.admin){location.reload();return;}"
        "msg.textContent='Logged in, but this browser does not keep the login inside a page "
        "framed by another site. ';const a=document.createElement('a');a.id='open-direct';"
        "a.href=location.href;a.target='_blank';a.rel='noopener';"
        "a.textContent='Open this page on its own';msg.append(a);return;}"
        "let m='Wrong password.';"
        "try{const j=await r.json();m=j.detail||j.error||m;}catch(_){}"
        "msg.textContent=m;};</script>"
    )


@router.post("/ll/admin/login", responses={**ok(LoggedIn), **ADMIN_ONLY})
async def admin_login(request: Request, password: str = Form("")) -> JSONResponse:
    """A correct password sets the signed admin cookie; wrong ones are throttled per client."""
    pol = policy(request)
    tried = pol.attempt(request, password)
    if tried.retry_after_s > 0:
        raise TooManyTries(tried.retry_after_s)
    if not tried.ok:
        raise Forbidden(f"wrong password. {pol.describe()}")
    resp = JSONResponse(answer(LoggedIn(admin=True)))
    # Over TLS (a Space), SameSite=None + Partitioned so the login also works inside the
    # huggingface.co page, which frames the Space from another site; cross-site writes are
    # refused by the guard whatever the cookie says. Over plain http: Strict.
    tls = pol.cookie_secure(request)
    # (written by hand: Starlette writes Partitioned only on Python 3.14+)
    same_site = "SameSite=None; Secure; Partitioned" if tls else "SameSite=Strict"
    resp.headers.append(
        "set-cookie",
        f"{COOKIE}={pol.login_cookie()}; Path=/; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; {same_site}",
    )
    return resp


@router.get(
    "/ll/admin/snapshot.zip",
    dependencies=[Depends(require_admin)],
    responses={**media("application/zip"), **ADMIN_ONLY},
)
async def admin_snapshot(request: Request) -> FileResponse:
    """Everything a study needs to survive the server: a consistent copy of the database
    (SQLite's online backup, taken while raters keep voting) and every take's audio, zipped
    (stored, not compressed: WAV does not shrink). Admin only."""
    store = request.app.state.listenlab.store
    tmp = Path(tempfile.mkdtemp(prefix="listenlab-snapshot-"))
    try:
        zpath = await asyncio.to_thread(snapshot_zip, store, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return FileResponse(
        zpath,
        media_type="application/zip",
        filename=f"listenlab-snapshot-{stamp}.zip",
        background=BackgroundTask(shutil.rmtree, tmp, ignore_errors=True),
    )


def snapshot_zip(store: Any, tmp: Path) -> Path:
    """``listenlab.db`` (the snapshot) and the audio folder, with the DB's relative paths."""
    (tmp / "copy").mkdir()
    files = store.snapshot(tmp / "copy" / "listenlab.db")
    zpath = tmp / "snapshot.zip"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
        for f, name in files:
            z.write(f, name)
    return zpath


@router.get("/ll/admin/whoami")
async def admin_whoami(request: Request) -> Whoami:
    pol = policy(request)
    return Whoami(admin=pol.is_admin(request), mode=pol.mode, note=pol.describe())
