"""``listenlab serve``: one FastAPI app on one port, the Gradio Playground mounted on it.

Why one app: a Hugging Face Space exposes a single port, and the player must reach its PCM
WebSocket on the *same origin* as the page (no CORS, no second server). So the raw-PCM route
(``/ll/ws``), the small JSON API the page uses (``/ll/api/...``) and the player's static files
(``/ll/static/...``) are plain FastAPI routes, and Gradio is mounted at ``/`` after them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI, File, Form, Request, UploadFile, WebSocket
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from app.config import DEFAULT_DB
from app.state import (
    DEFAULT_CONCURRENCY,
    STATIC,
    AppState,
    BackendEntry,
    Detector,
    default_detector,
    load_examples,
    parse_backend_args,
)
from app.web.admin import COOKIE as ADMIN_COOKIE
from app.web.admin import COOKIE_MAX_AGE_S as ADMIN_COOKIE_MAX_AGE_S
from app.web.admin import AdminPolicy, TooManyTries
from app.web.admin import policy as admin_policy
from app.web.errors import install_error_handler
from app.web.gate import Gate
from app.web.guard import (
    GuardConfig,
    GuardMiddleware,
    add_host_args,
    default_allowed_hosts,
    hosts_from_args,
    loads_limited,
)
from app.web.identity import IdentityMiddleware, identity
from app.web.offload import Offload, OffloadTimeout
from app.web.slashes import add_slash_redirects
from backends.base import Backend
from backends.errors import Forbidden, InvalidRequest, ListenlabError, NotFound

log = logging.getLogger("listenlab.app")

BODY_LIMIT_SMALL = 64 * 1024
"""JSON routes under ``/ll/`` (rename, share, login): nothing legitimate is bigger."""
BODY_LIMIT_DEFAULT = 1024 * 1024
"""Everything else (Gradio's own routes)."""
WS_MAX_FRAME = 1024 * 1024
"""uvicorn closes a ``/ll/ws`` connection (1009) on a bigger frame; up to it, a message over
``stream_routes.MAX_MESSAGE_CHARS`` gets an error and the socket stays open."""
DECODE_TIMEOUT_S = 45.0
DECODE_CONCURRENCY = 2


async def _caps_json(entry: BackendEntry) -> dict[str, Any]:
    with contextlib.suppress(Exception):  # remote engines learn their capabilities from the server
        await asyncio.wait_for(entry.backend.refresh(), 5.0)
    caps = entry.backend.capabilities
    try:
        voices = await asyncio.wait_for(entry.backend.voices(), 5.0)
        voice_error = None
    except Exception as e:  # a remote server being down must not break the page
        voices, voice_error = [], str(e)
    can_clone = caps.cloning or caps.voice_library
    return {
        "label": entry.label,
        "spec": entry.spec,
        "capabilities": asdict(caps),
        "voices": [asdict(v) for v in voices if v.name.lower() != "default"],
        "voice_error": voice_error,
        "can_clone": can_clone,
        "clone_note": None
        if can_clone
        else f"cloning is unavailable on {entry.label}: this backend cannot clone voices",
        "queued": entry.gate.queued,
        "active": entry.gate.active,
        "limit": entry.gate.limit,
    }


def create_app(
    backends: Mapping[str, Backend | str] | Sequence[str],
    db_path: str | Path = DEFAULT_DB,
    *,
    voices_dir: str | Path | None = None,
    concurrency: int | Mapping[str, int] = DEFAULT_CONCURRENCY,
    default: str | None = None,
    detector: Detector | None = None,
    warm: bool = True,
    mount_ui: bool = True,
    journal_mode: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
) -> FastAPI:
    """Build the app. ``backends`` maps a UI label to a Backend (or spec), or lists specs.

    ``allowed_hosts``: ``Host`` headers answered (default :func:`app.web.guard.default_allowed_hosts`:
    localhost, ``$SPACE_HOST``, ``$LISTENLAB_ALLOWED_HOSTS``); ``allowed_origins``: other page
    origins that may open ``/ll/ws`` (default ``$LISTENLAB_ALLOWED_ORIGINS``).
    """
    from app.store import Store
    from backends.registry import load_backend
    from voices.clips import MAX_UPLOAD_BYTES
    from voices.library import VoiceLibrary

    if isinstance(backends, Mapping):
        pairs = list(backends.items())
    else:
        pairs = parse_backend_args(list(backends))
    if not pairs:
        raise InvalidRequest("at least one backend is needed")
    entries: dict[str, BackendEntry] = {}
    for label, b in pairs:
        be = load_backend(b) if isinstance(b, str) else b
        limit = (
            concurrency.get(label, DEFAULT_CONCURRENCY)
            if isinstance(concurrency, Mapping)
            else concurrency
        )
        entries[label] = BackendEntry(label, be, Gate(int(limit)))
    if warm:
        for e in entries.values():
            e.backend.warm_up()  # first click must not pay for loading the voice
    db_path = Path(db_path)
    store = Store.open(db_path, journal_mode=journal_mode)
    lib = VoiceLibrary(voices_dir or db_path.parent / "voices")
    state = AppState(
        backends=entries,
        default=default or next(iter(entries)),
        store=store,
        library=lib,
        detector=detector or default_detector,
        examples=load_examples(),
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        for e in entries.values():
            with contextlib.suppress(Exception):
                await e.backend.aclose()
        store.close()

    app = FastAPI(title="listenlab", lifespan=lifespan)
    decoder = Offload(DECODE_CONCURRENCY, DECODE_TIMEOUT_S)
    app.state.listenlab = state
    app.state.admin_policy = AdminPolicy.from_env()
    app.mount("/ll/static", StaticFiles(directory=STATIC), name="ll-static")

    closed: list[tuple[str, str]] = []  # filled once every Gradio app is mounted
    guard = GuardConfig(
        closed=closed,
        allowed_hosts=list(allowed_hosts) if allowed_hosts else default_allowed_hosts(),
        body_limits=[
            ("POST", "/ll/api/voices", MAX_UPLOAD_BYTES + 256 * 1024),
            ("POST", "/admin/tests/gradio_api/upload", GRADIO_UPLOAD_LIMIT),
            ("*", "/ll/", BODY_LIMIT_SMALL),
        ],
        default_body_limit=BODY_LIMIT_DEFAULT,
        **({"allowed_origins": list(allowed_origins)} if allowed_origins is not None else {}),
    )
    app.state.guard = guard
    app.add_middleware(IdentityMiddleware)
    app.add_middleware(GuardMiddleware, config=guard)  # added last = runs first

    def who(request: Request) -> tuple[str, bool]:
        return identity(request).owner_id, admin_policy(request).is_admin(request)

    install_error_handler(app)

    @app.post("/ll/admin/login")
    async def admin_login(request: Request, password: str = Form("")) -> JSONResponse:
        pol = admin_policy(request)
        tried = pol.attempt(request, password)
        if tried.retry_after_s > 0:
            raise TooManyTries(tried.retry_after_s)
        if not tried.ok:
            raise Forbidden(f"wrong password. {pol.describe()}")
        resp = JSONResponse({"admin": True})
        resp.set_cookie(
            ADMIN_COOKIE,
            pol.login_cookie(),
            max_age=ADMIN_COOKIE_MAX_AGE_S,
            httponly=True,
            samesite="strict",
            secure=pol.cookie_secure(request),
        )
        return resp

    @app.get("/ll/admin/whoami")
    async def admin_whoami(request: Request) -> dict[str, Any]:
        pol = admin_policy(request)
        return {"admin": pol.is_admin(request), "mode": pol.mode, "note": pol.describe()}

    @app.get("/ll/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "backends": list(entries)}

    @app.get("/ll/api/config")
    async def config(request: Request) -> dict[str, Any]:
        from voices.clips import MAX_SECONDS, MIN_SECONDS

        owner, admin = who(request)
        systems = await asyncio.gather(*(_caps_json(e) for e in entries.values()))
        return {
            "default": state.default,
            "backends": systems,
            "examples": state.examples,
            "library": [v.public(owner, admin) for v in lib.visible(owner, admin)],
            "limits": {"min_s": MIN_SECONDS, "max_s": MAX_SECONDS, "max_bytes": MAX_UPLOAD_BYTES},
        }

    @app.websocket("/ll/ws")
    async def ws(websocket: WebSocket) -> None:
        from app.player.session import serve_session

        await serve_session(websocket, state)

    @app.get("/ll/api/takes/{take_id}.wav")
    async def take_wav(take_id: str, request: Request):
        """A take's audio: for the session that made it, or the admin."""
        if not take_id.isalnum():
            raise NotFound("no such take")
        info = await asyncio.to_thread(store.take_info, take_id)
        if info is None:
            raise NotFound("no such take")
        owner, admin = who(request)
        if not admin and info.meta.get("owner") != owner:
            raise Forbidden("this take belongs to another session")
        path = store.audio_path(take_id)
        return FileResponse(path, media_type="audio/wav", filename=f"{take_id}.wav")

    # -- voice library

    @app.get("/ll/api/voices")
    async def list_voices(request: Request) -> dict[str, Any]:
        owner, admin = who(request)
        return {"voices": [v.public(owner, admin) for v in lib.visible(owner, admin)]}

    @app.post("/ll/api/voices")
    async def add_voice(
        request: Request,
        file: UploadFile = File(...),
        name: str = Form(""),
        ref_text: str = Form(""),
        consent: str = Form(""),
    ) -> dict[str, Any]:
        from voices.clips import ClipError, prepare_clip

        data = await file.read(MAX_UPLOAD_BYTES + 1)
        await file.close()
        if len(data) > MAX_UPLOAD_BYTES:
            raise ClipError(f"the clip is over the {MAX_UPLOAD_BYTES // 2**20} MB limit")
        try:
            clip = await decoder.run(prepare_clip, data, file.filename)
        except OffloadTimeout:
            raise ClipError(
                f"decoding the clip took longer than {DECODE_TIMEOUT_S:.0f} s; send a simpler file"
            ) from None
        agreed = consent.lower() in {"1", "true", "yes", "on"}
        owner, admin = who(request)
        v = lib.add(
            name or Path(file.filename or "voice").stem,
            clip,
            ref_text=ref_text,
            consent=agreed,
            owner=owner,
        )
        return {
            "voice": v.public(owner, admin),
            "clip": {
                "duration_s": clip.duration_s,
                "trimmed_s": clip.trimmed_s,
                "sample_rate": clip.sample_rate,
                "source_format": clip.source_format,
            },
        }

    async def json_object(request: Request) -> dict[str, Any]:
        try:
            payload = loads_limited(await request.body())
        except ValueError as e:
            raise InvalidRequest(f"the body must be a JSON object: {e}") from None
        if not isinstance(payload, dict):
            raise InvalidRequest("the body must be a JSON object")
        return payload

    @app.post("/ll/api/voices/{voice_id}/rename")
    async def rename_voice(voice_id: str, request: Request) -> dict[str, Any]:
        payload = await json_object(request)
        owner, admin = who(request)
        lib.get_for(voice_id, owner, admin)
        v = lib.rename(voice_id, str(payload.get("name", "")))
        return {"voice": v.public(owner, admin)}

    @app.post("/ll/api/voices/{voice_id}/share")
    async def share_voice(voice_id: str, request: Request) -> dict[str, Any]:
        """Admin only: a shared voice is listed for, and usable by, every visitor."""
        admin_policy(request).require(request)
        payload = await json_object(request)
        v = lib.set_shared(voice_id, bool(payload.get("shared", True)))
        return {"voice": v.public(None, True)}

    @app.delete("/ll/api/voices/{voice_id}")
    async def delete_voice(voice_id: str, request: Request) -> dict[str, Any]:
        owner, admin = who(request)
        lib.get_for(voice_id, owner, admin)
        v = lib.delete(voice_id)
        for label, remote in v.synced.items():
            e = entries.get(label)
            if e is not None:
                with contextlib.suppress(Exception):
                    await e.backend.delete_voice(remote)
        return {"deleted": v.voice_id}

    @app.get("/ll/api/voices/{voice_id}.wav")
    async def voice_wav(voice_id: str, request: Request):
        owner, admin = who(request)
        lib.get_for(voice_id, owner, admin)
        return FileResponse(lib.root / f"{voice_id}.wav", media_type="audio/wav")

    # -- open arena (issue 9; app/arena/service.py): routes + /arena page, before "/" --
    from app.arena.service import install as install_arena

    install_arena(app, state, mount_ui=mount_ui)
    # -- end open arena --
    # -- listening tests (issue 9): rater pages, routes, WS handlers, admin pages (before "/")
    from app.listening import mount as mount_listening

    app = mount_listening(app, state, mount_ui=mount_ui)

    if mount_ui:
        import gradio as gr

        from app.playground.ui import CSS, build_ui

        app = gr.mount_gradio_app(app, build_ui(state), path="/", css=CSS)
        add_slash_redirects(app)  # /arena and /arena/ alike, past Gradio's catch-all at "/"
        app.state.listenlab = state
    closed.extend(close_unused_uploads(app))
    return app


GRADIO_UPLOAD_LIMIT = 2 * 1024 * 1024
"""The admin designer's prompt file (a .txt of sentences) is the only Gradio upload here."""
UPLOAD_COMPONENTS = {
    "File",
    "Files",
    "UploadButton",
    "Audio",
    "Image",
    "Video",
    "Gallery",
    "Model3D",
    "ImageEditor",
    "MultimodalTextbox",
    "SimpleImage",
}
"""Gradio components that post to ``gradio_api/upload``."""


def close_unused_uploads(app: FastAPI) -> list[tuple[str, str]]:
    """``gradio_api/upload`` of every mounted Gradio app that has no upload component.

    Gradio opens the route on every app; anonymous uploads are kept on disk. The Playground's
    voice upload is its own route (``/ll/api/voices``), the arena has none; only the admin
    designer (admin-only, under ``/admin/``) has a file input."""
    from starlette.routing import Mount

    closed = []
    for r in app.router.routes:
        blocks = getattr(getattr(r, "app", None), "blocks", None) if isinstance(r, Mount) else None
        if blocks is None:
            continue
        names = {type(b).__name__ for b in blocks.blocks.values()}
        if not names & UPLOAD_COMPONENTS:
            prefix = r.path.rstrip("/")
            closed += [("POST", f"{prefix}/gradio_api/upload"), ("POST", f"{prefix}/upload")]
    return closed


# --------------------------------------------------------------------------- CLI


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="start the Playground (Gradio UI + streaming player)",
        description="Serve the Playground, the player's WebSocket and the listening tests on "
        "one port. The address is printed once the port is bound.",
    )
    p.add_argument(
        "--backend",
        action="append",
        dest="backends",
        metavar="SPEC",
        help="backend spec, or LABEL=SPEC; repeat for several "
        "(default: $LISTENLAB_BACKENDS, space-separated, else piper)",
    )
    p.add_argument(
        "--host",
        default=None,
        help="address to listen on (default $GRADIO_SERVER_NAME or 127.0.0.1)",
    )
    p.add_argument(
        "--port", type=int, default=None, help="port (default $GRADIO_SERVER_PORT or 7860)"
    )
    p.add_argument(
        "--db",
        default=None,
        help="SQLite store (default $LISTENLAB_DB, $LISTENLAB_DATA/listenlab.db or "
        "data/listenlab.db)",
    )
    p.add_argument(
        "--journal-mode",
        choices=["wal", "delete"],
        default=None,
        help="SQLite journal (default: wal; delete for a DB under /data, network storage)",
    )
    p.add_argument("--voices", default=None, help="voice library folder (default: next to --db)")
    p.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help=f"streams per backend at once; more wait their turn (default {DEFAULT_CONCURRENCY})",
    )
    add_host_args(p)
    p.set_defaults(func=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    import socket

    import uvicorn

    from app.config import backends_from_env, resolve_db

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    host = args.host or os.environ.get("GRADIO_SERVER_NAME") or "127.0.0.1"
    port = args.port or int(os.environ.get("GRADIO_SERVER_PORT") or 7860)
    hosts, origins = hosts_from_args(args, host)
    # Bind first: a busy port fails at once, before any model loads and before any banner.
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.set_inheritable(True)
    except OSError as e:
        raise ListenlabError(
            f"cannot listen on {host}:{port}: {e.strerror or e} "
            "(is another server using it? choose another with --port)"
        ) from None
    try:
        app = create_app(
            args.backends or backends_from_env() or ["piper"],
            args.db or resolve_db(),
            voices_dir=args.voices,
            concurrency=args.concurrency,
            journal_mode=args.journal_mode,
            allowed_hosts=hosts,
            allowed_origins=origins,
        )
        store = app.state.listenlab.store
        print(f"listenlab: store {store.path.resolve()} (journal {store.journal_mode})", flush=True)
        # proxy_headers=False: uvicorn would believe X-Forwarded-For from 127.0.0.1 by itself;
        # app.web.guard.Proxies ($LISTENLAB_TRUSTED_PROXIES, a Space's private proxy) decides that
        config = uvicorn.Config(
            app, log_level="warning", ws_max_size=WS_MAX_FRAME, proxy_headers=False
        )
        server = uvicorn.Server(config)

        async def serve() -> None:
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started and not task.done():
                await asyncio.sleep(0.05)
            if server.started:
                shown = f"[{host}]" if ":" in host else host
                print(f"listenlab Playground on http://{shown}:{port}/", flush=True)
            await task

        asyncio.run(serve())
    finally:
        sock.close()
    return 0 if server.started else 1
