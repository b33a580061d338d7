"""The listening routes' success answers are what ``/openapi.json`` declares for them.

Real parts: ``listenlab serve``'s app under uvicorn on 127.0.0.1, the real Piper voice, a real
SQLite file; raters go through the real flow over HTTP and the WebSocket
(``tests.support.rater``): join, consent, the designer's questionnaire pages, the headphone
screen (trial by trial and all at once; one rater fails it), familiarisation, items with a
break between them, the vote, the completion code. Each answer is validated against the
schema the served ``/openapi.json`` declares for its status
(``tests.support.openapi_check.assert_declared``), in the states where a key is null, set or
absent. Machine scoring runs the real ``pitch`` metric (no model weights: the listening set's
540 MiB of models are ``tests/test_machine_listening.py``'s; without the ``metrics`` extra
each stimulus's error is the job's answer).
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from evaluation.listening import screening
from evaluation.listening.kinds.base import PLAYED_SHARE
from tests.support.app_util import TWO_PROMPTS, create_test, listening_app, live_server
from tests.support.openapi_check import assert_declared, declared
from tests.support.rater import RaterClient

PW = "answers-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}

OPERATIONS = {
    "GET /ll/listen/{test_id}/info": "TestInfo",
    "POST /ll/listen/{test_id}/join": "Joined",
    "GET /ll/listen/{test_id}/status": "RaterStatus",
    "POST /ll/listen/{test_id}/consent": "Consented",
    "POST /ll/listen/{test_id}/headphone": "ScreenProgress",
    "POST /ll/listen/{test_id}/questionnaire": "QuestionnaireStored",
    "POST /ll/listen/{test_id}/resume": "Resumed",
    "POST /ll/listen/{test_id}/screen/{n}": "ScreenProgress",
    "POST /ll/listen/{test_id}/familiar": "Familiarised",
    "POST /ll/listen/{test_id}/vote": "VoteStored",
    "GET /ll/admin/tests": "TestSummaryList",
    "POST /ll/admin/tests": "TestCreated",
    "GET /ll/admin/tests/{test_id}/results": "TestResults",
    "GET /ll/admin/tests/{test_id}/places": "TestPlaces",
    "POST /ll/admin/tests/{test_id}/status": "StatusSet",
    "POST /ll/admin/tests/{test_id}/crowd": "CrowdChanged",
    "POST /ll/admin/tests/{test_id}/score": "ScoringJob",
    "GET /ll/admin/tests/{test_id}/score": "ScoringJob",
}
"""The listening room's JSON answers and the model each declares."""

PAGES = [
    {
        "at": "start",
        "title": "About you",
        "fields": [
            {"key": "device", "label": "Device", "type": "choice", "options": ["Phones", "Other"]},
            {"key": "age", "label": "Age", "type": "number", "min": 18, "max": 99},
        ],
    },
    {
        "at": "end",
        "title": "Last",
        "fields": [{"key": "remark", "label": "Anything?", "type": "text", "required": False}],
    },
]


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app(PW)) as lv:
        yield lv


@pytest.fixture(scope="module")
def spec(live) -> dict:
    r = httpx.get(live.url + "openapi.json", timeout=60)
    assert r.status_code == 200
    return r.json()


@pytest.fixture(scope="module")
def study(live) -> str:
    """An open MOS test with every step a rater can meet: the designer's questionnaire pages
    (start and end), the antiphase headphone screen, familiarisation and a break after each
    item (the shortest pause there is, 5 s)."""
    return create_test(
        live,
        ADMIN,
        screening=False,
        screen="antiphase",
        familiarise=True,
        questionnaire=PAGES,
        break_after=1,
        break_min_s=5,
        target_valid=2,
        completion_code="DONE-1",
    )


def checked(spec: dict, r: httpx.Response, method: str, path: str) -> dict:
    """``r``'s JSON, after checking it is a 200 valid against what ``spec`` declares."""
    assert r.status_code == 200, (method, path, r.status_code, r.text)
    body = r.json()
    assert_declared(spec, method, path, body)
    return body


def test_every_answer_of_the_room_declares_its_model(spec):
    """A route added later that forgets its answer's model fails here."""
    for op, model in OPERATIONS.items():
        method, path = op.split()
        schema = declared(spec, method, path)
        assert schema.get("$ref") == f"#/components/schemas/{model}", (op, schema)
        body = spec["components"]["schemas"][model]
        assert body.get("properties"), (op, model)
    # the two media answers of a rater's screen trial and familiarisation clip
    for path in ("/ll/listen/{test_id}/screen/{n}", "/ll/listen/{test_id}/familiar/{k}"):
        assert set(spec["paths"][path]["get"]["responses"]["200"]["content"]) == {"audio/wav"}


def test_the_results_schema_comes_from_the_column_dictionary(spec):
    from app.listening.columns import VALUE_TYPES, columns
    from evaluation.listening.kinds import KINDS

    tables = spec["components"]["schemas"]["TestResults"]["properties"]
    shared = spec["components"]["schemas"]["ResultRow"]["properties"]
    for kind in KINDS.values():
        for f in kind.columns:
            if f.startswith("results/"):
                assert f.removeprefix("results/").removesuffix(".csv") in tables, f
    said = columns()["results/mos_pairwise.csv"]
    own = tables["mos_pairwise"]["items"]["properties"]
    assert own["rank_biserial"]["description"] == said["rank_biserial"]
    assert shared["mean"] == {"description": said["mean"], "type": ["number", "null"]}
    assert shared["n"]["type"] == [VALUE_TYPES["n"], "null"]
    assert shared["rater_id"]["type"] == ["string", "null"]  # the stored tables' declaration
    assert "p800_2" not in tables  # the export's, not a results table


async def screen_picks(c: RaterClient, kinds: list[str], wrong: bool = False) -> list[int]:
    """Fetch every trial's audio as the page does, pick as a listener on headphones would
    (``wrong``: every pick off by one), and wait until each trial had time to play."""
    picks, until = [], 0.0
    for n, kind in enumerate(kinds):
        r = await c.http.get(
            f"/ll/listen/{c.test_id}/screen/{n}", headers={"X-Rater-Token": c.token or ""}
        )
        assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
        audio, rate = screening.read_wav(r.content)
        until = max(until, time.monotonic() + len(audio) / rate)
        pick = screening.ideal_listener(kind, audio, rate)
        picks.append((pick + 1) % 3 if wrong else pick)
    await asyncio.sleep(max(0.0, until - time.monotonic()) + 0.05)
    return picks


async def rate_item(c: RaterClient, spec: dict, score: int) -> dict:
    st = checked(spec, await status_of(c), "GET", "/ll/listen/{test_id}/status")
    assert st["stage"] == "item" and st["item"] is not None and "break" not in st
    aid = st["item"]["assignment_id"]
    await c.listen(aid, 0)
    return checked(spec, await c.vote({"assignment_id": aid, "score": score}), "POST", VOTE)


VOTE = "/ll/listen/{test_id}/vote"
STATUS = "/ll/listen/{test_id}/status"


async def status_of(c: RaterClient) -> httpx.Response:
    return await c.http.get(
        f"/ll/listen/{c.test_id}/status", headers={"X-Rater-Token": c.token or ""}
    )


async def a_whole_session(live, spec: dict, tid: str) -> list[dict]:
    """One rater from the info page to the completion code; every answer checked."""
    c = RaterClient(live.url, tid)
    seen = []
    info = checked(
        spec, await c.http.get(f"/ll/listen/{tid}/info"), "GET", "/ll/listen/{test_id}/info"
    )
    assert info["kind"] == "mos" and info["status"] == "open"
    r = await c.post("join", {"crowd_id": "answers-1", "source": "PROLIFIC_PID"})
    joined = checked(spec, r, "POST", "/ll/listen/{test_id}/join")
    c.token = joined["token"]
    assert joined["resumed"] is False
    st = checked(spec, await status_of(c), "GET", STATUS)
    assert st["stage"] == "consent" and st["headphone"] is None and st["item"] is not None
    seen.append(st)
    r = await c.post("consent")
    assert checked(spec, r, "POST", "/ll/listen/{test_id}/consent") == {"consented": True}
    st = checked(spec, await status_of(c), "GET", STATUS)
    page = st["questionnaire"]
    assert st["stage"] == "questionnaire" and page["at"] == "start"
    assert "options" not in page["fields"][1] and page["fields"][1]["min"] == 18.0
    r = await c.post("questionnaire", {"answers": {"device": "Phones", "age": 30}})
    q = checked(spec, r, "POST", "/ll/listen/{test_id}/questionnaire")
    assert q == {"stored": True, "page": "start"}
    st = checked(spec, await status_of(c), "GET", STATUS)
    assert st["stage"] == "screen" and st["screen"]["answered"] == 0 and st["questionnaire"] is None
    kinds = st["screen"]["kinds"]
    picks = await screen_picks(c, kinds)
    r = await c.post("screen/0", {"answer": picks[0]})
    one = checked(spec, r, "POST", "/ll/listen/{test_id}/screen/{n}")
    assert one == {"answered": 1, "trials": len(kinds), "done": False}  # no outcome yet
    rest = {str(n): p for n, p in enumerate(picks) if n}
    r = await c.post("headphone", {"answers": rest})
    done = checked(spec, r, "POST", "/ll/listen/{test_id}/headphone")
    assert done["done"] and done["passed"] and done["screened_out"] is False
    st = checked(spec, await status_of(c), "GET", STATUS)
    assert st["stage"] == "familiarise" and st["headphone"]["passed"] is True
    until = 0.0
    for k in range(len(st["familiar"]["clips"])):
        r = await c.http.get(
            f"/ll/listen/{tid}/familiar/{k}", headers={"X-Rater-Token": c.token or ""}
        )
        audio, rate = screening.read_wav(r.content)
        until = max(until, time.monotonic() + PLAYED_SHARE * len(audio) / rate)
    await asyncio.sleep(max(0.0, until - time.monotonic()) + 0.2)
    r = await c.post("familiar")
    assert checked(spec, r, "POST", "/ll/listen/{test_id}/familiar") == {"familiarised": True}
    first = await rate_item(c, spec, 4)
    assert first["stored"] and not first["finished"] and "completion_code" not in first
    st = checked(spec, await status_of(c), "GET", STATUS)
    assert st["stage"] == "break" and st["item"] is None and st["break"]["after"] == 1
    seen.append(st)
    r = await c.post("resume")
    assert r.status_code == 409  # the pause has a minimum
    await asyncio.sleep(st["break"]["left_s"] + 0.2)
    r = await c.post("resume")
    assert checked(spec, r, "POST", "/ll/listen/{test_id}/resume") == {"resumed": True}
    r = await c.post("resume")
    assert checked(spec, r, "POST", "/ll/listen/{test_id}/resume") == {"resumed": False}
    last = await rate_item(c, spec, 2)
    assert last["finished"] and last["item"] is None and "completion_code" not in last
    st = checked(spec, await status_of(c), "GET", STATUS)
    assert st["stage"] == "questionnaire" and st["questionnaire"]["at"] == "end"
    r = await c.post("questionnaire", {"answers": {}})
    assert checked(spec, r, "POST", "/ll/listen/{test_id}/questionnaire")["page"] == "end"
    st = checked(spec, await status_of(c), "GET", STATUS)
    assert st["stage"] == "done" and st["completion_code"] == "DONE-1"
    assert st["redirect_url"] is None
    seen.append(st)
    # no page is due any more: nothing is stored, and no page is named
    r = await c.post("questionnaire", {"answers": {}})
    assert checked(spec, r, "POST", "/ll/listen/{test_id}/questionnaire") == {"stored": False}
    await c.aclose()
    return seen


async def screened_out(live, spec: dict, tid: str) -> dict:
    """A rater on loudspeakers: the screen fails, the session ends with the screen-out code."""
    c = RaterClient(live.url, tid)
    await c.join()
    r = await c.post("questionnaire", {"answers": {"device": "Other", "age": 50}})
    assert r.status_code == 200
    st = checked(spec, await status_of(c), "GET", STATUS)
    picks = await screen_picks(c, st["screen"]["kinds"], wrong=True)
    r = await c.post("headphone", {"answers": picks})
    out = checked(spec, r, "POST", "/ll/listen/{test_id}/headphone")
    assert out["done"] and out["passed"] is False and out["screened_out"] is True
    st = checked(spec, await status_of(c), "GET", STATUS)
    await c.aclose()
    return st


@pytest.fixture(scope="module")
def sessions(live, spec, study) -> tuple[list[dict], dict]:
    """A rater's whole session and a screened-out rater's (their statuses on the way)."""
    return asyncio.run(a_whole_session(live, spec, study)), asyncio.run(
        screened_out(live, spec, study)
    )


def test_a_rater_session_answers_as_declared(sessions):
    (consent, pause, done), out = sessions
    assert "completion_code" not in consent and "break" not in consent
    assert set(pause["break"]) == {"after", "min_s", "left_s", "number"}
    assert "break" not in done and done["finished"] and done["answered"] == done["total"] == 2
    assert out["stage"] == "screened_out" and out["screened_out"] is True
    assert out["screenout_code"] and "completion_code" not in out and out["item"] is None


def admin(method: str, live, path: str, **kw) -> httpx.Response:
    return httpx.request(method, live.url + path.lstrip("/"), headers=ADMIN, timeout=300, **kw)


def test_the_admin_answers_as_declared(live, spec, study):
    body = {
        "name": "glitch answers",
        "kind": "glitch",
        "systems": [{"name": "a", "backend": "piper"}],
        "prompts": TWO_PROMPTS[:1],
        "items_per_rater": 1,
        "familiarise": False,
        "open": False,
    }
    made = checked(
        spec, admin("POST", live, "/ll/admin/tests", json=body), "POST", "/ll/admin/tests"
    )
    assert made["url"] == f"/listen/{made['test_id']}"
    assert made["design"]["plan"][0]["half_width"] is None  # a glitch hunt plans no interval
    listed = checked(spec, admin("GET", live, "/ll/admin/tests"), "GET", "/ll/admin/tests")
    assert {t["test_id"] for t in listed["tests"]} >= {study, made["test_id"]}
    path = "/ll/admin/tests/{test_id}/places"
    p = checked(spec, admin("GET", live, f"/ll/admin/tests/{study}/places"), "GET", path)
    assert p["test_id"] == study and p["target"] == 2 and isinstance(p["places_left"], int)
    p = checked(spec, admin("GET", live, f"/ll/admin/tests/{made['test_id']}/places"), "GET", path)
    assert p["target"] is None and p["places_left"] is None
    path = "/ll/admin/tests/{test_id}/status"
    r = admin("POST", live, f"/ll/admin/tests/{made['test_id']}/status", json={"status": "closed"})
    assert checked(spec, r, "POST", path) == {"test_id": made["test_id"], "status": "closed"}
    path = "/ll/admin/tests/{test_id}/crowd"
    r = admin(
        "POST", live, f"/ll/admin/tests/{made['test_id']}/crowd", json={"screenout_code": "SO-9"}
    )
    got = checked(spec, r, "POST", path)
    assert got["changed"] == ["screenout_code"] and got["crowd"]["screenout_code"] == "SO-9"
    assert got["crowd"]["completion_code"] is None


def test_the_results_answer_as_declared(live, spec, study, sessions):
    """After a finished and a screened-out rater: the tables, screened raters out and in."""
    path = "/ll/admin/tests/{test_id}/results"
    for params in ({}, {"include_screened": "true"}):
        r = admin("GET", live, f"/ll/admin/tests/{study}/results", params=params)
        t = checked(spec, r, "GET", path)
        assert {"raters", "methods", "mos"} <= set(t)
        assert any(x["excluded"] for x in t["raters"]) and any(
            x["q_device"] == "Phones" for x in t["raters"]
        )


def test_machine_scoring_answers_as_declared(live, spec, study, sessions):
    from app.listening.scoring import ScoringJobs

    live.app.state.scoring = ScoringJobs(live.state.store, metrics=("pitch",))
    path = "/ll/admin/tests/{test_id}/score"
    r = admin("GET", live, f"/ll/admin/tests/{study}/score")
    assert r.status_code == 404
    job = checked(spec, admin("POST", live, f"/ll/admin/tests/{study}/score"), "POST", path)
    assert job["state"] in {"queued", "running", "done"}
    deadline = time.monotonic() + 300
    while job["state"] in {"queued", "running"} and time.monotonic() < deadline:
        time.sleep(0.3)
        job = checked(spec, admin("GET", live, f"/ll/admin/tests/{study}/score"), "GET", path)
    assert job["state"] == "done", job
    run = job["run"]  # each stimulus scored, or its error said (pyworld is an extra)
    assert run["stimuli"] == 4 and run["computed"] + len(run["errors"]) == 4, json.dumps(run)
    assert all(": pitch: " in e for e in run["errors"])


def body_validator(spec: dict, op: str, model: str | None = None):
    """A validator of ``op``'s declared request body (or of the component ``model``)."""
    import jsonschema_rs

    if model is None:
        method, path = op.split()
        content = spec["paths"][path][method.lower()]["requestBody"]["content"]
        schema = content["application/json"]["schema"]
    else:
        schema = {"$ref": f"#/components/schemas/{model}"}
    return jsonschema_rs.validator_for({**schema, "components": spec["components"]})


def test_the_vote_body_is_declared_per_kind(spec):
    """One definition per kind, from the kind's own vote model: its fields with their bounds,
    beside the ids every vote carries; the body names no kind, so they are alternatives."""
    import dataclasses

    from evaluation.listening.kinds import KINDS

    body = spec["components"]["schemas"]["VoteBody"]
    refs = {b["$ref"].rsplit("/", 1)[1] for b in body["anyOf"]}
    for kind in KINDS.values():
        assert kind.vote is not None, kind.name
        name = kind.vote.__name__
        assert name in refs, kind.name
        model = spec["components"]["schemas"][name]
        fields = {f.name for f in dataclasses.fields(kind.vote)}
        assert set(model["properties"]) == fields | {"answer_id", "assignment_id"}, name
    assert spec["components"]["schemas"]["MosVote"]["properties"]["score"]["maximum"] == 5
    p835 = spec["components"]["schemas"]["P835Vote"]
    assert set(p835["required"]) == {"answer_id", "assignment_id", "sig", "bak", "ovrl"}
    ids = {"answer_id": "a1", "assignment_id": "x1"}
    vote = body_validator(spec, "POST " + VOTE)
    mos = body_validator(spec, "", "MosVote")
    ab = body_validator(spec, "", "AbVote")
    mushra = body_validator(spec, "", "MushraVote")
    assert vote.is_valid({**ids, "score": 4}) and mos.is_valid({**ids, "score": 4})
    assert not mos.is_valid({**ids, "score": 6}) and not mos.is_valid({**ids, "score": "4"})
    assert ab.is_valid({**ids, "cmos": -3}) and ab.is_valid({**ids, "choice": "b"})
    assert not ab.is_valid({**ids, "cmos": 4}) and not ab.is_valid({**ids, "choice": "tie"})
    assert mushra.is_valid({**ids, "scores": [0, 55.5, 100]})
    assert not mushra.is_valid({**ids, "scores": [101]})
    assert not vote.is_valid({"score": 4})  # the ids, in every kind's body


def test_the_spec_declares_the_prompt_shorthands(live, spec):
    """What ``TestSpec.from_dict`` reads for ``prompts``, declared; each form makes a test."""
    new = body_validator(spec, "POST /ll/admin/tests")
    base = {"name": "p", "kind": "mos", "systems": [{"name": "a", "backend": "piper"}]}
    base |= {"items_per_rater": 1, "screening": False, "familiarise": False, "open": False}
    forms = (
        ["One prompt here."],
        "One prompt here.\nAnd a second one.",
        {"source": "harvard", "n": 2},
    )
    want = (1, 2, 2)
    for prompts, n in zip(forms, want, strict=True):
        assert new.is_valid({**base, "prompts": prompts}), prompts
        r = admin("POST", live, "/ll/admin/tests", json={**base, "prompts": prompts})
        tid = checked(spec, r, "POST", "/ll/admin/tests")["test_id"]
        cfg = live.app.state.listening.tests.require_test(tid).config
        assert len(cfg["design"]["prompts"]) == n, cfg["design"]
    assert not new.is_valid({**base, "prompts": {"source": "gutenberg"}})
    assert not new.is_valid({**base, "prompts": 3})


def test_every_kinds_rater_texts_are_as_declared(spec):
    """The status' ``texts`` of a test of each kind, with and without a screen, the built-in
    or the designer's questionnaire, a break: valid against the declared ``RaterTexts``."""
    from app.listening.texts import rater_texts
    from evaluation.listening.kinds import KINDS

    texts = body_validator(spec, "", "RaterTexts")
    configs = (
        {"screening": "none"},
        {"screening": "both", "questionnaire": True, "break_after": 2},
        {"screening": "antiphase", "questionnaire": PAGES, "design": {"ab_mode": "forced"}},
    )
    for kind in KINDS:
        for cfg in configs:
            got = rater_texts(kind, cfg, "consent text")
            errors = [e.message for e in texts.iter_errors(got)]
            assert not errors, (kind, cfg, errors[:3])
            assert (got["screen"] is None) == (cfg["screening"] == "none")
