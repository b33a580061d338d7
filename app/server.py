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

from fastapi import FastAPI, File, Form, HTTPException, Request, UploadFile, WebSocket
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from app.admin import COOKIE as ADMIN_COOKIE
from app.admin import COOKIE_MAX_AGE_S as ADMIN_COOKIE_MAX_AGE_S
from app.admin import AdminPolicy
from app.admin import policy as admin_policy
from app.gate import Gate
from app.state import (
    DEFAULT_CONCURRENCY,
    DEFAULT_DB,
    STATIC,
    AppState,
    BackendEntry,
    Detector,
    default_db,
    default_detector,
    journal_mode_for,
    load_examples,
    parse_backend_args,
)
from backends.base import Backend, InvalidRequest, ListenlabError

log = logging.getLogger("listenlab.app")


async def _caps_json(entry: BackendEntry) -> dict[str, Any]:
    refresh = getattr(entry.backend, "refresh", None)
    if callable(refresh):  # remote engines learn their capabilities from the server
        with contextlib.suppress(Exception):
            await asyncio.wait_for(refresh(), 5.0)
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
) -> FastAPI:
    """Build the app. ``backends`` maps a UI label to a Backend (or spec), or lists specs."""
    from backends.registry import load_backend
    from evaluation.store import Store
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
            if callable(getattr(e.backend, "warm_up", None)):
                e.backend.warm_up()  # first click must not pay for loading the voice
    db_path = Path(db_path)
    store = Store.open(db_path, journal_mode=journal_mode or journal_mode_for(db_path))
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
    app.state.listenlab = state
    app.state.admin_policy = AdminPolicy.from_env()
    app.mount("/ll/static", StaticFiles(directory=STATIC), name="ll-static")

    @app.exception_handler(ListenlabError)
    async def _ll_error(_req: Request, exc: ListenlabError):
        code = 404 if type(exc).__name__ in {"VoiceNotFound", "UnknownItem"} else 400
        return JSONResponse(
            {"error": str(exc)}, status_code=code if isinstance(exc, ValueError) else 502
        )

    @app.post("/ll/admin/login")
    async def admin_login(request: Request, password: str = Form("")) -> JSONResponse:
        pol = admin_policy(request)
        if not pol.password_ok(password):
            raise HTTPException(403, f"wrong password. {pol.describe()}")
        resp = JSONResponse({"admin": True})
        resp.set_cookie(
            ADMIN_COOKIE,
            pol.login_cookie(),
            max_age=ADMIN_COOKIE_MAX_AGE_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
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
    async def config() -> dict[str, Any]:
        from voices.clips import MAX_SECONDS, MAX_UPLOAD_BYTES, MIN_SECONDS

        systems = await asyncio.gather(*(_caps_json(e) for e in entries.values()))
        return {
            "default": state.default,
            "backends": systems,
            "examples": state.examples,
            "library": [v.to_dict() for v in lib.list()],
            "limits": {"min_s": MIN_SECONDS, "max_s": MAX_SECONDS, "max_bytes": MAX_UPLOAD_BYTES},
        }

    @app.websocket("/ll/ws")
    async def ws(websocket: WebSocket) -> None:
        from app.stream_routes import serve_session

        await serve_session(websocket, state)

    @app.get("/ll/api/takes/{take_id}.wav")
    async def take_wav(take_id: str):
        if not take_id.isalnum():
            raise HTTPException(404, "no such take")
        path = store.audio_path(take_id)
        return FileResponse(path, media_type="audio/wav", filename=f"{take_id}.wav")

    # -- voice library

    @app.get("/ll/api/voices")
    async def list_voices() -> dict[str, Any]:
        return {"voices": [v.to_dict() for v in lib.list()]}

    @app.post("/ll/api/voices")
    async def add_voice(
        file: UploadFile = File(...),
        name: str = Form(""),
        ref_text: str = Form(""),
        consent: str = Form(""),
    ) -> dict[str, Any]:
        from voices.clips import MAX_UPLOAD_BYTES, ClipError, prepare_clip

        data = await file.read(MAX_UPLOAD_BYTES + 1)
        await file.close()
        if len(data) > MAX_UPLOAD_BYTES:
            raise ClipError(f"the clip is over the {MAX_UPLOAD_BYTES // 2**20} MB limit")
        clip = await asyncio.to_thread(prepare_clip, data, file.filename)
        agreed = consent.lower() in {"1", "true", "yes", "on"}
        v = lib.add(
            name or Path(file.filename or "voice").stem, clip, ref_text=ref_text, consent=agreed
        )
        return {
            "voice": v.to_dict(),
            "clip": {
                "duration_s": clip.duration_s,
                "trimmed_s": clip.trimmed_s,
                "sample_rate": clip.sample_rate,
                "source_format": clip.source_format,
            },
        }

    @app.post("/ll/api/voices/{voice_id}/rename")
    async def rename_voice(voice_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"voice": lib.rename(voice_id, str(payload.get("name", ""))).to_dict()}

    @app.delete("/ll/api/voices/{voice_id}")
    async def delete_voice(voice_id: str) -> dict[str, Any]:
        v = lib.delete(voice_id)
        for label, remote in v.synced.items():
            e = entries.get(label)
            if e is not None:
                with contextlib.suppress(Exception):
                    await e.backend.delete_voice(remote)
        return {"deleted": v.voice_id}

    @app.get("/ll/api/voices/{voice_id}.wav")
    async def voice_wav(voice_id: str):
        lib.get(voice_id)
        return FileResponse(lib.root / f"{voice_id}.wav", media_type="audio/wav")

    # -- listening tests (issue 9): rater pages, routes, WS handlers, admin pages (before "/")
    from app.listening import mount as mount_listening

    app = mount_listening(app, state, mount_ui=mount_ui)

    if mount_ui:
        import gradio as gr

        from app.ui import CSS, build_ui

        app = gr.mount_gradio_app(app, build_ui(state), path="/", css=CSS)
        app.state.listenlab = state
    return app


# --------------------------------------------------------------------------- CLI


def add_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="start the Playground (Gradio UI + streaming player)")
    p.add_argument(
        "--backend",
        action="append",
        dest="backends",
        metavar="SPEC",
        help="backend spec, or LABEL=SPEC; repeat for several (default: piper)",
    )
    p.add_argument("--host", default=None, help="default $GRADIO_SERVER_NAME or 127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default $GRADIO_SERVER_PORT or 7860")
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
        "--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="streams per backend at once"
    )
    p.set_defaults(func=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    host = args.host or os.environ.get("GRADIO_SERVER_NAME") or "127.0.0.1"
    port = args.port or int(os.environ.get("GRADIO_SERVER_PORT") or 7860)
    app = create_app(
        args.backends or ["piper"],
        args.db or default_db(),
        voices_dir=args.voices,
        concurrency=args.concurrency,
        journal_mode=args.journal_mode,
    )
    print(f"listenlab Playground on http://{host}:{port}/", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
    return 0
