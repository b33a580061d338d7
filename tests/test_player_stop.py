"""A Stop that lands between a take's last audio frame and its ``done`` is answered, and the
glitch marks the page sent for that take are kept (issue #38, item 22).

The race: once the last frame is out, the session saves the take (a thread) and then sends
``done``; a Stop in that window cancelled the save, outside the ``try`` that answers with
``cancelled``, so the page got neither, and the marks waiting for the save were lost. Here
the real Piper voice over a real ``/ll/ws`` (uvicorn on 127.0.0.1): a short text (one chunk,
so the first frame is the last), a mark right after it, then a Stop, many times.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from websockets.asyncio.client import connect

from app.server import create_app
from tests.support.app_util import live_server, tmp_db

pytestmark = pytest.mark.timeout(300)
ROUNDS = 25
FINAL = {"done", "cancelled", "error"}


@pytest.fixture(scope="module")
def live(piper_det):
    app = create_app({"piper": piper_det}, tmp_db(), mount_ui=False, warm=False)
    with live_server(app) as lv:
        yield lv


async def next_json(ws, want: set[str], timeout: float = 30.0) -> dict:
    """The next JSON message whose type is in ``want`` (frames and others skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        m = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
        if isinstance(m, bytes):
            continue
        d = json.loads(m)
        if d.get("type") in want:
            return d


async def one_round(ws, token: int) -> tuple[dict, str, list[dict]]:
    """Speak, mark the take and Stop right after its first frame; (the answer to the Stop,
    the take id, the replies about the mark)."""
    await ws.send(json.dumps({"type": "speak", "token": token, "text": "Stop me now."}))
    start = await next_json(ws, {"start"})
    take_id = start["take_id"]
    while not isinstance(await ws.recv(), bytes):  # the first audio frame
        pass
    mark = {"type": "glitch", "take_id": take_id, "position_ms": 100.0, "report_id": f"m{token}"}
    await ws.send(json.dumps(mark))
    await ws.send(json.dumps({"type": "stop", "token": token}))
    answer, replies = None, []
    while answer is None or not replies:  # in either order
        m = await next_json(ws, FINAL | {"glitch_saved", "report_error"})
        if m["type"] in FINAL and m.get("token") == token:
            answer = m
        elif m.get("take_id") == take_id:  # glitch_saved, or report_error saying why not
            replies.append(m)
    return answer, take_id, replies


async def test_every_stop_is_answered_and_no_mark_is_dropped(live):
    url = live.url.replace("http://", "ws://") + "ll/ws"
    answers: list[str] = []
    async with connect(url, max_size=None) as ws:
        assert (await next_json(ws, {"hello"}))["type"] == "hello"
        for token in range(1, ROUNDS + 1):
            answer, take_id, replies = await one_round(ws, token)
            assert answer["token"] == token and answer["type"] in {"done", "cancelled"}, answer
            assert answer.get("take_id") == take_id
            answers.append(answer["type"])
            assert [r["type"] for r in replies] == ["glitch_saved"], replies
            assert replies[0]["report_id"] == f"m{token}"
    store = live.state.store
    rows = store.db.execute("SELECT count(*) FROM glitch_reports").fetchone()[0]
    print(f"{ROUNDS} stops: {answers.count('cancelled')} cancelled, {answers.count('done')} done")
    assert rows == ROUNDS
    assert answers.count("cancelled") > 0  # the Stop did land before `done`
