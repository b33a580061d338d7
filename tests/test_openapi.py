"""``/openapi.json`` of both apps declares what each route reads, from the code that checks it.

Why these tests: a declaration written beside a validator drifts from it; here each declared
schema is compared with the constants and models the routes validate against, every write
that declares no body is one that reads none, and the bounded parser still runs before any
model (a hostile body is the parser's clear 400, never a model's crash or a 5xx).
The schema-driven fuzz run of both apps is ``tests/test_openapi_fuzz.py`` (slow).
"""

from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

from app.api.schemas import SpeechBody
from app.arena.battles import CHOICES
from app.arena.service import MAX_MIN_VOTES
from app.listening.designer import CROWD_FIELDS, TestSpec
from app.listening.texts import QUESTIONNAIRE
from app.store.listening.rows import STATUSES
from app.web.inputs import JSON_BODY_BYTES, MAX_JSON_DEPTH
from tests.support.app_util import listening_app, live_server

PASSWORD = "openapi-admin-pw"
ADMIN = {"Authorization": f"Bearer {PASSWORD}"}
WRITES = {"post", "put", "patch", "delete"}

BODILESS = {
    "serve": {
        "DELETE /ll/admin/uploads/{upload_id}",
        "DELETE /ll/api/voices/{voice_id}",
        "POST /ll/arena/api/voters/{voter}/drop",
        "POST /ll/arena/session",
        "POST /ll/listen/{test_id}/consent",
        "POST /ll/listen/{test_id}/familiar",
        "POST /ll/listen/{test_id}/resume",
        "POST /ll/admin/tests/{test_id}/score",
    },
    "api": {"DELETE /v1/audio/voices/{name}", "POST /ping"},
}
"""The writes that read no body (their handlers take none)."""


def api_app():
    from app.api.server import create_api_app
    from backends.registry import load_backend

    return create_api_app(load_backend("piper?deterministic=1"), own_backend=True)


@pytest.fixture(scope="module")
def specs() -> dict[str, dict]:
    return {"serve": listening_app(admin_password=PASSWORD).openapi(), "api": api_app().openapi()}


def operations(spec: dict) -> dict[str, dict]:
    return {
        f"{m.upper()} {p}": op
        for p, ops in spec["paths"].items()
        for m, op in ops.items()
        if m in {"get", *WRITES}
    }


def body_schema(spec: dict, op: str) -> dict:
    """The declared JSON body's schema of ``op`` (its ``$ref`` followed)."""
    content = operations(spec)[op]["requestBody"]["content"]
    ref = content["application/json"]["schema"]["$ref"]
    return spec["components"]["schemas"][ref.rsplit("/", 1)[1]]


def test_every_write_that_reads_a_body_declares_it(specs):
    for app, spec in specs.items():
        ops = operations(spec)
        bodiless = {k for k, op in ops.items() if k.split()[0].lower() in WRITES}
        bodiless = {k for k in bodiless if "requestBody" not in ops[k]}
        assert bodiless == BODILESS[app], app


def test_every_operation_declares_its_refusals(specs):
    """The guard's refusals (400, 403, 413) on every operation, in each app's error shape."""
    for app, spec in specs.items():
        shape = "ErrorResponse" if app == "api" else "ErrorBody"
        for name, op in operations(spec).items():
            for status in ("400", "403", "413"):
                schema = op["responses"][status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": f"#/components/schemas/{shape}"}, (name, status)


def test_the_declared_bodies_are_the_validators_own(specs):
    serve, api = specs["serve"], specs["api"]
    q = body_schema(serve, "POST /ll/listen/{test_id}/questionnaire")["properties"]["answers"]
    answers = serve["components"]["schemas"][q["$ref"].rsplit("/", 1)[1]]
    assert {k: v["enum"] for k, v in answers["properties"].items()} == {
        x["key"]: x["options"] for x in QUESTIONNAIRE
    }
    crowd = body_schema(serve, "POST /ll/admin/tests/{test_id}/crowd")
    assert crowd["additionalProperties"] is False and crowd["minProperties"] == 1
    assert {k: v["anyOf"][0]["maxLength"] for k, v in crowd["properties"].items()} == CROWD_FIELDS
    status = body_schema(serve, "POST /ll/admin/tests/{test_id}/status")["properties"]
    assert tuple(status["status"]["enum"]) == STATUSES
    vote = body_schema(serve, "POST /ll/arena/api/battles/{battle_id}/vote")
    assert tuple(vote["properties"]["choice"]["enum"]) == CHOICES
    settings = body_schema(serve, "POST /ll/arena/api/settings")["properties"]["min_votes"]
    assert settings["anyOf"][0]["maximum"] == MAX_MIN_VOTES
    spec = body_schema(serve, "POST /ll/admin/tests")
    assert set(spec["properties"]) == {f.name for f in dataclasses.fields(TestSpec)}
    speech = body_schema(api, "POST /v1/audio/speech")
    fields = {f.alias or k for k, f in SpeechBody.model_fields.items()}
    assert set(speech["properties"]) == fields and "input" in speech["required"]


def test_declared_operations_per_app(specs):
    """Before #38 item 21: 2 bodies of ``serve``'s operations and 1 of ``api``'s were declared."""
    for app, spec in specs.items():
        ops = operations(spec)
        bodies = {k for k, op in ops.items() if "requestBody" in op}
        writes = {k for k in ops if k.split()[0].lower() in WRITES}
        assert bodies == writes - BODILESS[app], app
    assert len(operations(specs["api"])) == 12


def real_answer(status: str, resp: dict) -> bool:
    """A 2xx answer a client can read: a non-JSON media type, or JSON whose schema names a
    model (a ``$ref``, properties, or an array of such), never FastAPI's ``{}`` or a bare
    object."""
    if not status.startswith("2"):
        return False
    content = resp.get("content") or {}
    for media_type, body in content.items():
        if media_type != "application/json":
            return True
        text = json.dumps(body.get("schema") or {})
        if "$ref" in text or '"properties"' in text:
            return True
    return False


EMPTY_ANSWERS = {"serve": set(), "api": {"GET /ping", "POST /ping"}}
"""Operations whose success answer has no body (vLLM-Omni's ``/ping``: 200, nothing sent)."""


def test_every_operation_declares_its_success_answer(specs):
    """#38 item 21: each operation's success answer is declared from the model it is built
    from (18 of ``serve``'s 58 operations and 3 of ``api``'s 12 declared one before); the
    answers without a body declare none."""
    for app, spec in specs.items():
        ops = operations(spec)
        missing = [
            k
            for k, op in ops.items()
            if not any(real_answer(s, r) for s, r in op["responses"].items())
        ]
        assert sorted(missing) == sorted(EMPTY_ANSWERS[app]), app
        for k in EMPTY_ANSWERS[app]:
            assert "content" not in ops[k]["responses"]["200"], k


def test_a_hostile_body_meets_the_bounded_parser_before_any_model(tmp_path):
    """Declared routes still read their bytes through the byte limit and the depth-bounded
    parser first: 2,500 brackets are that parser's 400 (not a model's error, not a 5xx), a
    body over the room's limit its 413; the admin check runs before an admin route's body is
    read; a body of the wrong shape is the model's 400 naming the field."""
    deep = b"[" * 2500 + b"]" * 2500
    too_deep = f"nested too deeply (the limit is {MAX_JSON_DEPTH} levels)"
    app = listening_app(admin_password=PASSWORD)
    with live_server(app) as live:

        def post(path: str, content: bytes, headers: dict | None = None) -> httpx.Response:
            h = {"Content-Type": "application/json", **(headers or {})}
            return httpx.post(live.url + path, content=content, headers=h, timeout=60)

        for path in (
            "ll/api/voices/0123456789abcdef/rename",  # no such voice: the body is refused first
            "ll/listen/t1/join",
            "ll/admin/tests",
            "ll/arena/api/settings",
        ):
            r = post(path, deep, ADMIN)
            assert r.status_code == 400, (path, r.status_code, r.text[:300])
            assert too_deep in r.json()["error"], (path, r.text[:300])
        r = post("ll/api/voices/0123456789abcdef/share", deep)  # a visitor: refused first
        assert r.status_code == 403 and "admin" in r.json()["error"], r.text[:300]
        big = b'{"crowd_id": "' + b"x" * JSON_BODY_BYTES + b'"}'
        r = post("ll/listen/t1/join", big)
        assert r.status_code == 413, r.text[:300]
        r = post("ll/api/voices/0123456789abcdef/rename", b'{"name": 5}')
        assert r.status_code == 400, r.text[:300]
        assert r.json()["error"] == "the body is not valid: name: Input should be a valid string"
        r = post("ll/arena/api/settings", b'{"min_votes": "many"}', ADMIN)
        assert r.status_code == 400 and "min_votes must be a whole number" in r.json()["error"]
        r = post("ll/admin/tests/t1/crowd", b'{"title": "x"}', ADMIN)
        assert r.status_code == 400 and "'title' is not a crowd setting" in r.json()["error"]
        # was a 500 (int("abc") in TestSpec.from_dict's Harvard shorthand): a clear 400
        for n in (b'"abc"', b"[3]", b"null"):
            spec = b'{"name": "h", "kind": "mos", "items_per_rater": 2, "systems": '
            spec += b'[{"name": "a", "backend": "piper"}], "prompts": {"source": "harvard", "n": '
            r = post("ll/admin/tests", spec + n + b"}}", ADMIN)
            assert r.status_code == 400, (n, r.status_code, r.text[:300])
            assert r.json()["error"] == "prompts: {source: harvard, n}: n is a whole number"
        assert app.state.listening.tests.list_tests() == []


def test_the_docs_state_the_counts(specs):
    """docs/api.md's table of what ``/openapi.json`` declares, read against the schemas."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    for app, name in (("serve", "`listenlab serve`"), ("api", "`listenlab api`")):
        ops = operations(specs[app])
        writes = [k for k in ops if k.split()[0] in {"POST", "PUT", "PATCH"}]
        bodies = [k for k in writes if "requestBody" in ops[k]]
        refused = [k for k, op in ops.items() if any(s[0] in "45" for s in op["responses"])]
        assert len(refused) == len(ops)
        row = f"| {name} | {len(ops)} | {len(bodies)} of the {len(writes)} writes"
        assert row in doc, row
        answered = [
            k
            for k, op in ops.items()
            if k in EMPTY_ANSWERS[app] or any(real_answer(s, r) for s, r in op["responses"].items())
        ]
        line = next(x for x in doc.splitlines() if x.startswith(row))
        last = line.rstrip(" |").rsplit("|", 1)[1].strip()
        assert last.startswith(f"all {len(answered)}") and len(answered) == len(ops), line
        assert f"{name} {len(ops)} operations" in doc or f"{name} {len(ops)} (" in doc, name
    query = [k for k, op in operations(specs["serve"]).items() if "parameters" in op]
    query = [
        k
        for k in query
        if any(p["in"] == "query" for p in operations(specs["serve"])[k]["parameters"])
    ]
    assert f"| {len(query)} of {len(query)} |" in doc


def test_starlettes_own_refusals_answer_in_the_declared_shape(specs):
    """Found by the fuzz run: a malformed multipart form on ``POST /ll/api/voices`` was
    Starlette's ``{"detail": "Invalid multipart data."}``, not the ``ErrorBody`` its 400 declares
    (``error`` required). Now Starlette's refusals (the form, an unknown path, a wrong method)
    carry ``error`` and keep ``detail``; a non-admin's JSON refusal under /admin/ too."""
    ref = operations(specs["serve"])["POST /ll/api/voices"]["responses"]["400"]
    assert ref["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    app = listening_app(admin_password=PASSWORD)
    with live_server(app) as live:
        r = httpx.post(
            live.url + "ll/api/voices",
            content=b"--x\r\nnot a part\r\n",
            headers={"Content-Type": "multipart/form-data; boundary=x"},
            timeout=60,
        )
        assert r.status_code == 400, r.text
        body = r.json()
        assert body["error"] == body["detail"] and "multipart" in body["error"].lower(), body
        assert app.state.listenlab.library.visible("nobody", True) == []  # nothing stored
        r = httpx.get(live.url + "ll/no/such/route", timeout=60)
        assert r.status_code == 404 and r.json()["error"] == r.json()["detail"] == "Not Found"
        r = httpx.delete(live.url + "ll/admin/whoami", timeout=60)
        assert r.status_code == 405 and r.json()["error"] == "Method Not Allowed"
        assert r.headers["allow"] == "GET"
        r = httpx.get(live.url + "admin/arena", headers={"Accept": "application/json"})
        assert r.status_code == 403 and r.json()["error"].startswith("admin only"), r.text
