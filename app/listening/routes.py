"""HTTP routes of the listening tests.

Rater (no admin rights; the rater token travels in the ``X-Rater-Token`` header, never in a
URL that could leak through a referrer or a log):

* ``GET /listen/{test_id}`` — the rater page (the one player, ``listen.js`` and the test kind's
  ``page.js``, served from the kind's folder at ``/ll/listening/kinds/{kind}/page.js``).
* ``POST /ll/listen/{test_id}/join`` {crowd_id?, source?} -> {token}
* ``GET /ll/listen/{test_id}/status`` -> progress, consent, headphone check, next item
* ``POST /ll/listen/{test_id}/consent``
* ``POST /ll/listen/{test_id}/resume`` -> ends the rater's break (the session cap)
* ``POST /ll/listen/{test_id}/questionnaire`` {answers: {question: option}} (tests made with it)
* ``GET /ll/listen/{test_id}/screen/{n}`` -> the headphone screen's trial ``n`` (WAV);
  ``POST /ll/listen/{test_id}/screen/{n}`` {answer}, or ``POST .../headphone`` {answers}: a
  pick counts only once the trial's audio was sent and had time to play (the key stays here)
* ``GET /ll/listen/{test_id}/familiar/{k}`` -> familiarisation clip ``k`` (WAV);
  ``POST /ll/listen/{test_id}/familiar`` (Continue: once every clip had time to play)
* ``POST /ll/listen/{test_id}/vote`` {answer_id, assignment_id, score | cmos | choice | scores}

Admin (``require_admin``): ``GET /ll/admin/tests``, ``GET /ll/admin/tests/{id}/results``,
``GET /ll/admin/tests/{id}/places`` (refill: places left),
``POST /ll/admin/tests/{id}/status`` {status}, ``GET /ll/admin/tests/{id}/export.zip``
(``?public=true``: without crowd ids and codes).

Errors: 400 bad input, 403 not allowed (bad token, closed test, not your item), 404 unknown
test, 409 listen first / already answered, 413 body too large. Each is an error class with its
status (:mod:`backends.errors`), answered by the app's one handler (:mod:`app.web.errors`),
whose body carries the message as ``detail`` (which the rater page reads) and ``error``.

Why module-level routers: the routes take the :class:`~app.listening.service.Listening` service
from ``request.app.state`` (set by :func:`app.listening.mount`), so they can be read, tested and
mounted without a closure over the app.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, RootModel, create_model

from app.listening.answers import Answer, dataclass_fields, wire_model
from app.listening.breaks import Resumed
from app.listening.columns import results_schema
from app.listening.designer import (
    CROWD_FIELDS,
    DesignSummary,
    PromptsGiven,
    TestSpec,
    check_crowd,
)
from app.listening.enrolment import Consented, Joined, TestInfo
from app.listening.familiarisation import Familiarised
from app.listening.flow import Denied, NotYet
from app.listening.jsonable import clean_json, frames_json
from app.listening.persistence import CONFIRM_FIELD, check_may_open
from app.listening.questionnaire import QuestionnaireStored
from app.listening.refill import Places, test_places
from app.listening.screening import ScreenProgress
from app.listening.service import Listening, RaterStatus, VoteStored, check_id
from app.listening.texts import QUESTIONNAIRE
from app.store.listening.rows import STATUSES, TestSummary
from app.web.admin import TooManyTries, login_page, policy, require_admin
from app.web.inputs import JSON_BODY_BYTES
from app.web.openapi import DeclaredRoute, JsonBody, as_sent, errors, media, ok
from backends.errors import Forbidden, InvalidRequest, NotFound, NotPersistent
from evaluation.listening.kinds import KINDS, TestKind
from evaluation.listening.results import test_results

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"listen.js", "listen.css", "screen.js"}
MAX_BODY = JSON_BODY_BYTES


class BodyTooLarge(InvalidRequest):
    """A rater's or the admin's JSON body is over :data:`MAX_BODY`."""

    http_status, reason = 413, "too_large"


def listening(request: Request) -> Listening:
    """The app's listening-test service (set by :func:`app.listening.mount`)."""
    return request.app.state.listening


def rater_token(request: Request) -> str:
    return request.headers.get("x-rater-token", "")[:200]


class RaterJson(JsonBody):
    """A rater's or the admin's JSON body (empty: ``{}``), read up to :data:`MAX_BODY` bytes
    (413 past it), then the bounded parser; ``/openapi.json`` declares ``model``'s schema."""

    async def raw(self, request: Request) -> bytes:
        raw = b""
        async for part in request.stream():
            raw += part
            if len(raw) > MAX_BODY:
                raise BodyTooLarge(f"request body over {MAX_BODY} bytes")
        return raw


# -- the bodies, declared (the services check them, with their own messages: ``as_sent``)

Pick = Annotated[int, Field(ge=0, le=2, description="The interval heard as odd: 0, 1 or 2")]


class Join(BaseModel):
    """``POST /ll/listen/{id}/join`` (all optional): the crowd platform's ids (1-128 letters,
    digits or ``. _ : @ -``) and the URL parameter the crowd id came from."""

    crowd_id: str | None = None
    source: str | None = None
    study_id: str | None = None
    session_id: str | None = None


class Headphone(BaseModel):
    """``POST /ll/listen/{id}/headphone``: every trial's pick at once, or ``{trial: pick}``."""

    answers: list[Pick] | dict[str, Pick]


class ScreenAnswer(BaseModel):
    """``POST /ll/listen/{id}/screen/{n}``: trial ``n``'s pick."""

    answer: Pick


Questionnaire = create_model(
    "Questionnaire",
    __doc__="``POST /ll/listen/{id}/questionnaire``: one listed option per question.",
    answers=(
        create_model(
            "QuestionnaireAnswers",
            **{q["key"]: (Literal[tuple(q["options"])], ...) for q in QUESTIONNAIRE},
        ),
        ...,
    ),
)


class VoteIds(BaseModel):
    """What every vote carries: the answer's id (chosen by the page; a re-sent answer is
    stored once) and the item's."""

    model_config = ConfigDict(extra="allow")

    answer_id: str
    assignment_id: str


def kind_vote(kind: TestKind) -> type[BaseModel]:
    """A kind's vote body: the ids and the fields of the kind's own vote model
    (:attr:`TestKind.vote`: their types and bounds); a kind that declares none: the ids."""
    if kind.vote is None:
        return VoteIds
    doc = (kind.vote.__doc__ or "").strip()
    fields = dataclass_fields(kind.vote)
    return create_model(kind.vote.__name__, __base__=VoteIds, __doc__=doc, **fields)


VOTES = {k.vote or VoteIds: kind_vote(k) for k in KINDS.values()}
"""One body model per kind's vote model (A/B and parity A/B share theirs)."""


class VoteBody(RootModel[Union[tuple(VOTES.values())]]):  # type: ignore[misc]  # noqa: UP007
    """``POST /ll/listen/{id}/vote``: the item's ids and the answer in the fields of the
    test's kind, one definition per kind (MOS ``score``, A/B ``cmos`` or ``choice``, MUSHRA
    ``scores``, …). The body does not name its kind (the test does), so the kinds' bodies are
    alternatives (``anyOf``), not a discriminated union; the kind checks its own, and what
    depends on the item (how many clips) only there."""


TestSpecBody = create_model(
    "TestSpec",
    __doc__="``POST /ll/admin/tests``: a test spec as sent (:class:`TestSpec`), its "
    "``prompts`` in any form :meth:`TestSpec.from_dict` reads: the texts, the texts pasted as "
    "one string (one a line), or ``{source: harvard, n}``; none when ``stimuli`` brings them.",
    **{**dataclass_fields(TestSpec), "prompts": (PromptsGiven | None, None)},
)


class Status(BaseModel):
    """``POST /ll/admin/tests/{id}/status``; opening on a store a restart loses needs the
    confirmation."""

    status: Literal[STATUSES]  # type: ignore[valid-type]
    confirm_not_persistent: bool = False


Crowd = create_model(
    "Crowd",
    __doc__="``POST /ll/admin/tests/{id}/crowd``: one or more crowd settings (empty: none).",
    __config__=ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1}),
    **{k: (str | None, Field(None, max_length=n)) for k, n in CROWD_FIELDS.items()},
)
assert CONFIRM_FIELD in Status.model_fields


# -- the admin's answers (the rater's are their steps': ``Joined``, ``RaterStatus``, …)


class StatusSet(Answer):
    """``POST /ll/admin/tests/{id}/status``: the test's status now."""

    test_id: str
    status: Literal[STATUSES]  # type: ignore[valid-type]


CrowdSettings = create_model(
    "CrowdSettings",
    __doc__="A test's crowd settings now (null: none; a code per rater).",
    __base__=Answer,
    **{k: (str | None, ...) for k in CROWD_FIELDS},
)


class CrowdChanged(Answer):
    """``POST /ll/admin/tests/{id}/crowd``: the fields that changed and the settings now."""

    test_id: str
    changed: list[str]
    crowd: CrowdSettings  # type: ignore[valid-type]


class TestCreated(Answer):
    """``POST /ll/admin/tests``: the new test, its rater page and the planner's report."""

    __test__ = False  # not a pytest class

    test_id: str
    url: str
    """The rater page's path (``/listen/{test_id}``)."""
    design: DesignSummary


TestPlaces = wire_model(
    Places,
    name="TestPlaces",
    lead={"test_id": (str, ...)},
    line=(str, ...),
)
"""``GET /ll/admin/tests/{id}/places``: :class:`Places`, and ``line``, the sentence the Tests
tab shows."""
RESULTS = {
    200: {
        "description": "The test's results tables",
        "content": {"application/json": {"schema": results_schema()}},
    }
}


def body(model: Any, parse: Any = as_sent, *, required: bool = True) -> Any:
    """A route's JSON body: ``model`` declared, ``parse`` (the service's own check) run;
    ``required=False``: the page may send none (``{}``)."""
    return Depends(RaterJson(model, required=required, parse=parse))


def kind_script_url(kind: str) -> str:
    """Where the rater page loads a kind's answer script (served from the kind's folder)."""
    return f"/ll/listening/kinds/{kind}/page.js"


def rater_page(test_id: str, kind: str | None) -> str:
    """The rater page of a test, with its kind's script (none for an unknown test: the page
    then says what ``/info`` answers)."""
    html_ = (STATIC / "listen.html").read_text(encoding="utf-8")
    script = f'<script src="{kind_script_url(kind)}"></script>' if kind in KINDS else ""
    return html_.replace("__TEST_ID__", json.dumps(test_id)[1:-1]).replace(
        "__KIND_SCRIPT__", script
    )


def wav(data: bytes) -> Response:
    return Response(data, media_type="audio/wav", headers={"Cache-Control": "no-store"})


Svc = Depends(listening)
Token = Depends(rater_token)
RATER = errors(InvalidRequest, Denied, NotFound, NotYet, BodyTooLarge)
"""What a rater's request may be refused with."""
ADMIN = errors(InvalidRequest, Forbidden, NotFound, NotPersistent, BodyTooLarge, TooManyTries)
WAV = {**media("audio/wav"), **RATER}
SCRIPT = {**media("text/javascript", "text/css"), **errors(NotFound)}

router = APIRouter(route_class=DeclaredRoute)
"""The rater's page and routes (no admin rights; errors answer through the app's one handler)."""
admin_router = APIRouter(
    route_class=DeclaredRoute, dependencies=[Depends(require_admin)], responses=ADMIN
)
"""The admin's JSON routes."""


@router.get("/listen/{test_id}", response_class=HTMLResponse)
async def listen_page(test_id: str, svc: Listening = Svc) -> HTMLResponse:
    try:
        check_id(test_id, "test id")
    except InvalidRequest as e:
        raise NotFound(str(e)) from None
    t = await asyncio.to_thread(svc.tests.get_test, test_id)
    page = rater_page(test_id, t.kind if t else None)
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


@router.get("/ll/listening/static/{name}", responses=SCRIPT, response_class=Response)
async def listen_static(name: str) -> Response:
    if name not in STATIC_FILES:
        raise NotFound("no such file")
    media = "text/javascript" if name.endswith(".js") else "text/css"
    return Response((STATIC / name).read_text(encoding="utf-8"), media_type=media)


@router.get("/ll/listening/kinds/{kind}/{name}", responses=SCRIPT, response_class=Response)
async def kind_static(kind: str, name: str) -> Response:
    """A file of a kind's folder that the kind lists in ``static_files`` (its ``page.js``);
    nothing else of the folder is served."""
    k = KINDS.get(kind)
    if k is None or k.folder is None or name not in k.static_files:
        raise NotFound("no such file")
    media = "text/javascript" if name.endswith(".js") else "text/css"
    return Response((k.folder / name).read_text(encoding="utf-8"), media_type=media)


@router.get("/ll/listen/{test_id}/info", responses={**ok(TestInfo), **RATER})
async def info(test_id: str, svc: Listening = Svc) -> dict[str, Any]:
    return await asyncio.to_thread(svc.info, test_id)


@router.post("/ll/listen/{test_id}/join", responses={**ok(Joined), **RATER})
async def join(
    test_id: str, svc: Listening = Svc, b: dict = body(Join, required=False)
) -> dict[str, Any]:
    return await asyncio.to_thread(
        svc.join,
        test_id,
        b.get("crowd_id") or None,
        b.get("source") or None,
        b.get("study_id") or None,
        b.get("session_id") or None,
    )


@router.get("/ll/listen/{test_id}/status", responses={**ok(RaterStatus), **RATER})
async def status(test_id: str, svc: Listening = Svc, token: str = Token) -> dict[str, Any]:
    return await asyncio.to_thread(svc.status, test_id, token)


@router.post("/ll/listen/{test_id}/consent", responses={**ok(Consented), **RATER})
async def consent(test_id: str, svc: Listening = Svc, token: str = Token) -> dict[str, Any]:
    return await asyncio.to_thread(svc.consent, test_id, token)


@router.post("/ll/listen/{test_id}/headphone", responses={**ok(ScreenProgress), **RATER})
async def headphone(
    test_id: str, svc: Listening = Svc, token: str = Token, b: dict = body(Headphone)
) -> dict[str, Any]:
    return await asyncio.to_thread(svc.headphone, test_id, token, b.get("answers"))


@router.post("/ll/listen/{test_id}/questionnaire", responses={**ok(QuestionnaireStored), **RATER})
async def questionnaire(
    test_id: str, svc: Listening = Svc, token: str = Token, b: dict = body(Questionnaire)
) -> dict[str, Any]:
    return await asyncio.to_thread(svc.questionnaire, test_id, token, b.get("answers"))


@router.post("/ll/listen/{test_id}/resume", responses={**ok(Resumed), **RATER})
async def resume(test_id: str, svc: Listening = Svc, token: str = Token) -> dict[str, Any]:
    """End the rater's break (409 before its minimum pause has passed)."""
    return await asyncio.to_thread(svc.resume, test_id, token)


@router.get("/ll/listen/{test_id}/screen/{n}", responses=WAV, response_class=Response)
async def screen_audio(test_id: str, n: int, svc: Listening = Svc, token: str = Token):
    return wav(await asyncio.to_thread(svc.screen_audio, test_id, token, n))


@router.post("/ll/listen/{test_id}/screen/{n}", responses={**ok(ScreenProgress), **RATER})
async def screen_answer(
    test_id: str, n: int, svc: Listening = Svc, token: str = Token, b: dict = body(ScreenAnswer)
) -> dict[str, Any]:
    return await asyncio.to_thread(svc.screen_answer, test_id, token, n, b.get("answer"))


@router.get("/ll/listen/{test_id}/familiar/{k}", responses=WAV, response_class=Response)
async def familiar_audio(test_id: str, k: int, svc: Listening = Svc, token: str = Token):
    return wav(await asyncio.to_thread(svc.familiar_audio, test_id, token, k))


@router.post("/ll/listen/{test_id}/familiar", responses={**ok(Familiarised), **RATER})
async def familiarised(test_id: str, svc: Listening = Svc, token: str = Token) -> dict[str, Any]:
    return await asyncio.to_thread(svc.familiarised, test_id, token)


@router.post("/ll/listen/{test_id}/vote", responses={**ok(VoteStored), **RATER})
async def vote(
    test_id: str, svc: Listening = Svc, token: str = Token, b: dict = body(VoteBody)
) -> dict[str, Any]:
    return await asyncio.to_thread(svc.vote, test_id, token, b)


# -- admin


@admin_router.get("/ll/admin/tests", responses=ok(TestSummary, "tests"))
async def list_tests(svc: Listening = Svc) -> dict[str, Any]:
    rows = await asyncio.to_thread(svc.tests.list_tests)
    return {"tests": clean_json([t.as_dict() for t in rows])}


def results_of(svc: Listening, test_id: str, include_screened: bool = False) -> dict:
    """A test's results tables (:func:`evaluation.listening.results.test_results` on its rows)."""
    return test_results(svc.tests.test_data(test_id), include_screened=include_screened)


@admin_router.get("/ll/admin/tests/{test_id}/results", responses=RESULTS)
async def results(
    test_id: str, include_screened: bool = False, svc: Listening = Svc
) -> JSONResponse:
    t = await asyncio.to_thread(results_of, svc, test_id, include_screened)
    return JSONResponse(frames_json(t))


@admin_router.get("/ll/admin/tests/{test_id}/places", responses=ok(TestPlaces))
async def places(test_id: str, svc: Listening = Svc) -> dict[str, Any]:
    """Where the test stands against its target: places left, valid and excluded raters
    (:mod:`app.listening.refill`); ``line`` is the sentence the Tests tab shows."""
    p = await asyncio.to_thread(test_places, svc.tests, check_id(test_id, "test id"))
    return TestPlaces.of({"test_id": test_id, **p.to_dict(), "line": p.line()})


@admin_router.post("/ll/admin/tests/{test_id}/status", responses=ok(StatusSet))
async def set_status(
    request: Request, test_id: str, svc: Listening = Svc, b: dict = body(Status)
) -> dict[str, Any]:
    if b.get("status") == "open":
        check_may_open(request.app.state.listenlab.storage, b.get(CONFIRM_FIELD) is True)
    await asyncio.to_thread(svc.tests.set_status, test_id, str(b.get("status", "")))
    return StatusSet(test_id=test_id, status=b.get("status")).wire()


@admin_router.post("/ll/admin/tests/{test_id}/crowd", responses=ok(CrowdChanged))
async def crowd(
    test_id: str, svc: Listening = Svc, b: dict = body(Crowd, check_crowd)
) -> dict[str, Any]:
    """Change the completion and screen-out codes and URLs, also while the test is open."""
    from app.listening.designer import change_crowd

    out = await asyncio.to_thread(change_crowd, svc.tests, test_id, b)
    return CrowdChanged.of({"test_id": test_id, **out})


@admin_router.post("/ll/admin/tests", responses=ok(TestCreated))
async def new_test(
    request: Request, spec: TestSpec = body(TestSpecBody, TestSpec.from_dict)
) -> dict[str, Any]:
    from app.listening.designer import create_test, design_summary

    test_id = await create_test(request.app.state.listenlab, spec)
    tests = request.app.state.listening.tests
    return TestCreated.of(
        {
            "test_id": test_id,
            "url": f"/listen/{test_id}",
            "design": design_summary(tests, test_id),
        }
    )


@admin_router.get(
    "/ll/admin/tests/{test_id}/export.zip",
    responses=media("application/zip"),
    response_class=Response,
)
async def export(test_id: str, public: bool = False, svc: Listening = Svc) -> Response:
    data = await asyncio.to_thread(export_zip, svc, test_id, public)
    return Response(
        data,
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{test_id}.zip"'},
    )


async def admin_pages(request: Request, call_next):
    """HTTP middleware: everything under /admin/ (the Gradio designer and results, with their
    API and queue routes) is admin-only; a refused browser gets the login form."""
    path = request.url.path
    if path == "/admin" or path.startswith("/admin/"):
        pol = policy(request)
        if not pol.is_admin(request):
            if "text/html" in request.headers.get("accept", ""):
                return HTMLResponse(login_page(pol.describe()), status_code=403)
            message = f"admin only. {pol.describe()}"
            return JSONResponse({"error": message, "detail": message}, status_code=403)
    return await call_next(request)


def export_zip(svc: Listening, test_id: str, public: bool = False) -> bytes:
    """The test's export (:mod:`app.listening.export`): raw rows, results, ``study.json``,
    ``methods.md``; ``public`` leaves out crowd ids and codes."""
    from app.listening.export import export_zip as zip_of

    check_id(test_id, "test id")
    return zip_of(svc.tests, test_id, public=public)


__all__ = [
    "BodyTooLarge",
    "Crowd",
    "CrowdChanged",
    "CrowdSettings",
    "StatusSet",
    "TestCreated",
    "TestPlaces",
    "TestSpecBody",
    "Headphone",
    "Join",
    "Questionnaire",
    "RaterJson",
    "ScreenAnswer",
    "Status",
    "VoteBody",
    "VoteIds",
    "kind_vote",
    "admin_pages",
    "admin_router",
    "export_zip",
    "frames_json",
    "results_of",
    "router",
]
