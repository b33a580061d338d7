"""HTTP routes of the listening tests.

Rater (no admin rights; the rater token travels in the ``X-Rater-Token`` header, never in a
URL that could leak through a referrer or a log):

* ``GET /listen/{test_id}`` — the rater page (the one player + ``listen.js``).
* ``POST /ll/listen/{test_id}/join`` {crowd_id?, source?} -> {token}
* ``GET /ll/listen/{test_id}/status`` -> progress, consent, headphone check, next item
* ``POST /ll/listen/{test_id}/consent``
* ``GET /ll/listen/{test_id}/screen/{n}`` -> the headphone screen's trial ``n`` (WAV);
  ``POST /ll/listen/{test_id}/screen/{n}`` {answer}, or ``POST .../headphone`` {answers}: a
  pick counts only once the trial's audio was sent and had time to play (the key stays here)
* ``GET /ll/listen/{test_id}/familiar/{k}`` -> familiarisation clip ``k`` (WAV);
  ``POST /ll/listen/{test_id}/familiar`` (Continue: once every clip had time to play)
* ``POST /ll/listen/{test_id}/vote`` {answer_id, assignment_id, score | cmos | choice | scores}

Admin (``require_admin``): ``GET /ll/admin/tests``, ``GET /ll/admin/tests/{id}/results``,
``POST /ll/admin/tests/{id}/status`` {status}, ``GET /ll/admin/tests/{id}/export.zip``.

Errors: 400 bad input, 403 not allowed (bad token, closed test, not your item), 404 unknown
test, 409 listen first / already answered, 413 body too large.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import zipfile
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from app.listening.service import Denied, Listening, NotYet, check_id
from app.store import AlreadyVoted, UnknownItem
from app.web.admin import policy, require_admin
from backends.errors import InvalidRequest
from evaluation.listening.results import test_results
from evaluation.report import safe_csv

STATIC = Path(__file__).parent / "static"
MAX_BODY = 16_384


async def _body(request: Request) -> dict[str, Any]:
    raw = b""
    async for part in request.stream():
        raw += part
        if len(raw) > MAX_BODY:
            raise HTTPException(413, f"request body over {MAX_BODY} bytes")
    if not raw:
        return {}
    try:
        d = json.loads(raw)
    except ValueError:
        raise HTTPException(400, "the body must be JSON") from None
    if not isinstance(d, dict):
        raise HTTPException(400, "the body must be a JSON object")
    return d


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    if hasattr(v, "item"):
        return _clean(v.item())
    return v


def frames_json(tables: dict[str, Any]) -> dict[str, Any]:
    return {k: _clean(df.to_dict(orient="records")) for k, df in tables.items()}


def rater_page(test_id: str) -> str:
    html = (STATIC / "listen.html").read_text(encoding="utf-8")
    return html.replace("__TEST_ID__", json.dumps(test_id)[1:-1])


def add_routes(app: FastAPI, svc: Listening, state: Any = None) -> None:
    async def call(fn, *a, **kw):
        try:
            return await asyncio.to_thread(fn, *a, **kw)
        except Denied as e:
            raise HTTPException(403, str(e)) from None
        except NotYet as e:
            raise HTTPException(409, str(e)) from None
        except AlreadyVoted as e:
            raise HTTPException(409, str(e)) from None
        except UnknownItem as e:
            raise HTTPException(404, str(e)) from None
        except InvalidRequest as e:
            raise HTTPException(400, str(e)) from None

    def token(request: Request) -> str:
        return request.headers.get("x-rater-token", "")[:200]

    @app.get("/listen/{test_id}", response_class=HTMLResponse)
    async def listen_page(test_id: str) -> HTMLResponse:
        try:
            check_id(test_id, "test id")
        except InvalidRequest as e:
            raise HTTPException(404, str(e)) from None
        return HTMLResponse(rater_page(test_id), headers={"Cache-Control": "no-store"})

    @app.get("/ll/listening/static/{name}")
    async def listen_static(name: str) -> Response:
        if name not in {"listen.js", "listen.css", "screen.js", "mushra.js"}:
            raise HTTPException(404, "no such file")
        media = "text/javascript" if name.endswith(".js") else "text/css"
        return Response((STATIC / name).read_text(encoding="utf-8"), media_type=media)

    @app.get("/ll/listen/{test_id}/info")
    async def info(test_id: str) -> dict[str, Any]:
        return await call(svc.info, test_id)

    @app.post("/ll/listen/{test_id}/join")
    async def join(test_id: str, request: Request) -> dict[str, Any]:
        b = await _body(request)
        return await call(
            svc.join,
            test_id,
            b.get("crowd_id") or None,
            b.get("source") or None,
            b.get("study_id") or None,
            b.get("session_id") or None,
        )

    @app.get("/ll/listen/{test_id}/status")
    async def status(test_id: str, request: Request) -> dict[str, Any]:
        return await call(svc.status, test_id, token(request))

    @app.post("/ll/listen/{test_id}/consent")
    async def consent(test_id: str, request: Request) -> dict[str, Any]:
        return await call(svc.consent, test_id, token(request))

    @app.post("/ll/listen/{test_id}/headphone")
    async def headphone(test_id: str, request: Request) -> dict[str, Any]:
        b = await _body(request)
        return await call(svc.headphone, test_id, token(request), b.get("answers"))

    def wav(data: bytes) -> Response:
        return Response(data, media_type="audio/wav", headers={"Cache-Control": "no-store"})

    @app.get("/ll/listen/{test_id}/screen/{n}")
    async def screen_audio(test_id: str, n: int, request: Request) -> Response:
        return wav(await call(svc.screen_audio, test_id, token(request), n))

    @app.post("/ll/listen/{test_id}/screen/{n}")
    async def screen_answer(test_id: str, n: int, request: Request) -> dict[str, Any]:
        b = await _body(request)
        return await call(svc.screen_answer, test_id, token(request), n, b.get("answer"))

    @app.get("/ll/listen/{test_id}/familiar/{k}")
    async def familiar_audio(test_id: str, k: int, request: Request) -> Response:
        return wav(await call(svc.familiar_audio, test_id, token(request), k))

    @app.post("/ll/listen/{test_id}/familiar")
    async def familiarised(test_id: str, request: Request) -> dict[str, Any]:
        return await call(svc.familiarised, test_id, token(request))

    @app.post("/ll/listen/{test_id}/vote")
    async def vote(test_id: str, request: Request) -> dict[str, Any]:
        b = await _body(request)
        return await call(svc.vote, test_id, token(request), b)

    # -- admin

    admin = [Depends(require_admin)]

    @app.get("/ll/admin/tests", dependencies=admin)
    async def list_tests() -> dict[str, Any]:
        return {"tests": _clean(await call(svc.tests.list_tests))}

    @app.get("/ll/admin/tests/{test_id}/results", dependencies=admin)
    async def results(test_id: str, include_screened: bool = False) -> JSONResponse:
        t = await call(test_results, svc.tests, test_id, include_screened=include_screened)
        return JSONResponse(frames_json(t))

    @app.post("/ll/admin/tests/{test_id}/status", dependencies=admin)
    async def set_status(test_id: str, request: Request) -> dict[str, Any]:
        b = await _body(request)
        await call(svc.tests.set_status, test_id, str(b.get("status", "")))
        return {"test_id": test_id, "status": b.get("status")}

    @app.post("/ll/admin/tests", dependencies=admin)
    async def new_test(request: Request) -> dict[str, Any]:
        from app.listening.designer import TestSpec, create_test

        body = await _body(request)
        try:
            test_id = await create_test(state, TestSpec.from_dict(body))
        except InvalidRequest as e:
            raise HTTPException(400, str(e)) from None
        return {"test_id": test_id, "url": f"/listen/{test_id}"}

    @app.middleware("http")
    async def admin_pages(request: Request, call_next):
        """Everything under /admin/ (the Gradio designer and results, with their API and
        queue routes) is admin-only; a refused browser gets the login form."""
        path = request.url.path
        if path == "/admin" or path.startswith("/admin/"):
            pol = policy(request)
            if not pol.is_admin(request):
                if "text/html" in request.headers.get("accept", ""):
                    return HTMLResponse(login_page(pol.describe()), status_code=403)
                return JSONResponse({"detail": f"admin only. {pol.describe()}"}, status_code=403)
        return await call_next(request)

    @app.get("/ll/admin/tests/{test_id}/export.zip", dependencies=admin)
    async def export(test_id: str) -> Response:
        data = await call(export_zip, svc, test_id)
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{test_id}.zip"'},
        )


def login_page(note: str) -> str:
    """The admin login form (posts to ``/ll/admin/login``, then reloads)."""
    import html

    return (
        "<!doctype html><meta charset=utf-8><title>listenlab admin</title>"
        "<body style='font-family:system-ui;max-width:34rem;margin:3rem auto'>"
        "<h1>Admin only</h1><p id=note>" + html.escape(note) + "</p>"
        "<form id=f><input type=password name=password placeholder='admin password' "
        "autocomplete=current-password> <button>Log in</button></form><p id=msg></p>"
        "<script>document.getElementById('f').onsubmit=async(e)=>{e.preventDefault();"
        "const r=await fetch('/ll/admin/login',{method:'POST',body:new FormData(e.target)});"
        "if(r.ok){location.reload();return;}let m='Wrong password.';"
        "try{const j=await r.json();m=j.detail||j.error||m;}catch(_){}"
        "document.getElementById('msg').textContent=m;};</script>"
    )


def export_zip(svc: Listening, test_id: str) -> bytes:
    """Every raw row of the test and its computed tables, as CSV files in one zip."""
    check_id(test_id, "test id")
    tests = svc.tests
    t = tests.require_test(test_id)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("test.json", json.dumps(t, indent=1, default=str))
        for table in (
            "stimuli",
            "test_raters",
            "assignments",
            "answers",
            "play_events",
            "mos_ratings",
            "ab_votes",
            "mushra_ratings",
            "glitch_reports",
        ):
            df = svc.store._query(f'SELECT * FROM "{table}" WHERE test_id = ?', [test_id])
            if table == "test_raters":
                df = df.drop(columns=["token_hash"])
            z.writestr(f"raw/{table}.csv", safe_csv(df))
        ratings = tests.ratings_frame(test_id)  # one row per rating, system_id on each
        z.writestr("raw/ratings.csv", safe_csv(ratings))
        for name, df in test_results(tests, test_id, include_screened=False).items():
            z.writestr(f"results/{name}.csv", safe_csv(df, index=name == "glitches_by_seam"))
    return buf.getvalue()


__all__ = ["add_routes", "export_zip", "frames_json"]
