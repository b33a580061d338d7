"""The Playground server without a browser: routes, the PCM WebSocket protocol, the queue.

Everything is real (uvicorn on 127.0.0.1, the Piper voice, SQLite), except the vLLM-Omni
server, which needs a GPU: the remote cases use the remote engineer's fault-injection
stand-in (``tests/support/fault_server.py``), which speaks vLLM-Omni's wire protocol.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import numpy as np
import pytest
import websockets

from app.server import create_app
from app.state import parse_backend_args
from app.web.gate import Gate
from tests.support.app_util import TrackingBackend, free_port, live_server, tmp_db

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
TEXT = "Hello there. This is a short test of the streaming player, in three small pieces."
SLOW = (
    "piper?deterministic=1&profile=custom&rate=22050&channels=1&first_frames=1"
    "&chunk_frames=1&frame_hz=2&pace=1"
)


@pytest.fixture(scope="module")
def fault_url():
    from tests.support.fault_server import create_fault_app
    from tests.support.remote_util import serve_app

    with serve_app(create_fault_app()) as url:
        yield url


@pytest.fixture(scope="module")
def server(fault_url):
    from backends.registry import load_backend

    tracked = TrackingBackend(load_backend(SLOW))
    app = create_app(
        {
            "piper": "piper?deterministic=1",
            "slow": tracked,
            "cut": f"vllm-omni+http://{fault_url[7:]}/cut,after=2?mode=sse",
            "clone": f"vllm-omni+http://{fault_url[7:]}/ok?mode=sse&cloning=1",
        },
        tmp_db(),
        concurrency={"slow": 1},
    )
    with live_server(app) as live:
        live.tracked = tracked
        yield live


class Page:
    """A WebSocket client speaking the player's protocol, collecting what the server sends."""

    def __init__(self, ws):
        self.ws = ws
        self.json: list[dict] = []
        self.frames: list[tuple[int, int, float, np.ndarray]] = []

    async def speak(self, token: int, **kw) -> None:
        await self.ws.send(json.dumps({"type": "speak", "token": token, **kw}))

    async def until(self, pred, timeout: float = 60.0) -> dict:
        """Read messages until one JSON message satisfies ``pred``; return it."""

        async def loop():
            while True:
                m = await self.ws.recv()
                if isinstance(m, bytes):
                    tok, idx, ms = struct.unpack("<IIf", m[:12])
                    self.frames.append((tok, idx, ms, np.frombuffer(m[12:], "<i2")))
                    continue
                d = json.loads(m)
                self.json.append(d)
                if pred(d):
                    return d

        return await asyncio.wait_for(loop(), timeout)


def ws_url(live) -> str:
    return f"ws://127.0.0.1:{live.port}/ll/ws"


async def test_config_lists_backends_capabilities_examples(server):
    async with httpx.AsyncClient() as c:
        r = await c.get(server.url + "ll/api/config")
    d = r.json()
    assert d["default"] == "piper"
    labels = [b["label"] for b in d["backends"]]
    assert labels == ["piper", "slow", "cut", "clone"]
    piper = d["backends"][0]
    assert piper["capabilities"]["sample_rate"] == 22050
    assert piper["voices"][0]["name"] == "joe"
    assert piper["can_clone"] is False and "cloning is unavailable" in piper["clone_note"]
    clone = d["backends"][3]
    assert clone["can_clone"] is True and clone["clone_note"] is None
    assert {"vivian", "ryan"} <= {v["name"] for v in clone["voices"]}
    assert "default" not in {v["name"] for v in clone["voices"]}
    assert len(d["examples"]) >= 5 and all(e["text"] for e in d["examples"])
    async with httpx.AsyncClient() as c:
        page = await c.get(server.url)
        js = await c.get(server.url + "ll/static/player-core.js")
    assert page.status_code == 200 and "gradio" in page.text.lower()
    assert js.status_code == 200 and "window.LLPlayer" in js.text


async def test_ws_stream_protocol_and_stored_take(server):
    async with websockets.connect(ws_url(server)) as ws:
        p = Page(ws)
        await p.until(lambda m: m["type"] == "hello")
        await p.speak(7, text=TEXT, backend="piper")
        done = await p.until(lambda m: m["type"] in {"done", "error"})
    assert done["type"] == "done" and done["token"] == 7
    kinds = [m["type"] for m in p.json]
    assert kinds.index("generating") < kinds.index("start") < kinds.index("done")
    start = next(m for m in p.json if m["type"] == "start")
    assert (start["sample_rate"], start["channels"]) == (22050, 1)
    assert [f[0] for f in p.frames] == [7] * len(p.frames)
    assert [f[1] for f in p.frames] == list(range(len(p.frames)))
    assert len(p.frames) == done["chunks"] >= 2
    arrivals = [f[2] for f in p.frames]
    assert arrivals == sorted(arrivals) and arrivals[0] == pytest.approx(done["ttfa_ms"], abs=0.1)
    take = server.state.store.load_take(done["take_id"])
    assert take.status == "ok" and take.take_id == start["take_id"]
    pcm = np.concatenate([f[3] for f in p.frames])
    assert np.array_equal(pcm, take.audio.reshape(-1))
    assert done["boundaries_ms"] == pytest.approx([b / 22.05 for b in take.boundaries])
    # the download route serves the stored take
    async with httpx.AsyncClient() as c:
        r = await c.get(server.url + f"ll/api/takes/{take.take_id}.wav")
    import io

    import soundfile as sf

    wav, sr = sf.read(io.BytesIO(r.content), dtype="int16")
    assert sr == 22050 and np.array_equal(wav, take.audio.reshape(-1))


@pytest.mark.parametrize(
    ("msg", "error"),
    [
        ({"text": "   "}, "Input text cannot be empty"),
        ({"text": "x" * 5001}, "limit is 5000"),
        ({"text": "Hi.", "backend": "nope"}, "unknown backend 'nope'"),
        ({"text": "Hi.", "voice": "zelda"}, "unknown voice 'zelda'"),
        ({"text": "Hi.", "speed": 9}, "speed must be between"),
        ({"text": "Hi.", "backend": "clone", "speed": 1.5}, "only to non-streaming"),
        ({"text": "Hi.", "voice": "lib:" + "0" * 32}, "no voice with id"),
    ],
)
async def test_bad_requests_get_a_clear_error_and_no_take(server, msg, error):
    n_before = len(server.state.store.take_ids())
    async with websockets.connect(ws_url(server)) as ws:
        p = Page(ws)
        await p.speak(3, **msg)
        m = await p.until(lambda m: m["type"] in {"error", "done"})
    assert m["type"] == "error" and error in m["message"] and m["token"] == 3
    assert m.get("partial") in (False, None)
    assert p.frames == []
    assert len(server.state.store.take_ids()) == n_before


async def test_whole_mode_allows_speed_and_sends_one_chunk(server):
    async with websockets.connect(ws_url(server)) as ws:
        p = Page(ws)
        await p.speak(1, text="Hi there.", backend="clone", speed=1.5, mode="whole")
        m = await p.until(lambda m: m["type"] in {"error", "done"})
    assert m["type"] == "done", m
    assert m["chunks"] == 1 and len(p.frames) == 1
    take = server.state.store.load_take(m["take_id"])
    assert take.meta["mode"] == "whole" and take.request.speed == 1.5


async def test_mid_stream_failure_is_an_error_with_partial_audio(server):
    async with websockets.connect(ws_url(server)) as ws:
        p = Page(ws)
        await p.speak(5, text=TEXT, backend="cut")
        m = await p.until(lambda m: m["type"] in {"error", "done"})
    assert m["type"] == "error" and m["partial"] is True, m
    assert len(p.frames) >= 1
    take = server.state.store.load_take(m["take_id"])
    assert take.status == "error" and take.error
    assert not any(j["type"] == "done" for j in p.json)


async def test_stop_and_stale_tokens(server):
    async with websockets.connect(ws_url(server)) as ws:
        p = Page(ws)
        await p.speak(1, text=TEXT * 3, backend="slow")
        await p.until(lambda m: m["type"] == "start")
        await p.speak(2, text="Second one.", backend="piper")  # replaces the first
        await p.until(lambda m: m["type"] == "done" and m["token"] == 2)
    cancelled = [m for m in p.json if m["type"] == "cancelled"]
    assert [m["token"] for m in cancelled] == [1]
    # after token 2 started, no frame of token 1 was sent
    first2 = next(i for i, f in enumerate(p.frames) if f[0] == 2)
    assert all(f[0] == 2 for f in p.frames[first2:])
    assert server.tracked.events[-1][0] == "closed"
    t1 = next(m for m in p.json if m["type"] == "generating" and m["token"] == 1)["take_id"]
    assert server.state.store.load_take(t1).status == "cancelled"


async def test_queue_position_is_reported_per_backend(server):
    async with websockets.connect(ws_url(server)) as a, websockets.connect(ws_url(server)) as b:
        pa, pb = Page(a), Page(b)
        await pa.speak(1, text=TEXT, backend="slow")
        await pa.until(lambda m: m["type"] == "generating")
        await pb.speak(1, text="Queued behind.", backend="slow")
        q = await pb.until(lambda m: m["type"] in {"queued", "generating"})
        assert q == {"type": "queued", "token": 1, "position": 1}
        # another backend is not blocked by the slow one's queue
        async with websockets.connect(ws_url(server)) as c:
            pc = Page(c)
            await pc.speak(9, text="Hi.", backend="piper")
            assert (await pc.until(lambda m: m["type"] in {"queued", "generating"}))[
                "type"
            ] == "generating"
        await a.send(json.dumps({"type": "stop", "token": 1}))
        g = await pb.until(lambda m: m["type"] == "generating", timeout=30)
        assert g["token"] == 1
        await pb.until(lambda m: m["type"] == "done", timeout=60)
    assert server.state.backends["slow"].gate.active == 0


async def test_glitch_and_underrun_reports_wait_for_the_take(server):
    async with websockets.connect(ws_url(server)) as ws:
        p = Page(ws)
        await p.speak(4, text=TEXT, backend="slow")
        gen = await p.until(lambda m: m["type"] == "generating")
        tid = gen["take_id"]
        await p.until(lambda m: m["type"] == "start")
        # sent while the take is still streaming (not in the DB yet)
        await ws.send(
            json.dumps(
                {
                    "type": "glitch",
                    "take_id": tid,
                    "position_ms": 1100.0,
                    "kind": "gap",
                    "report_id": "r" * 32,
                }
            )
        )
        await ws.send(
            json.dumps(
                {
                    "type": "underruns",
                    "take_id": tid,
                    "count": 2,
                    "stall_ms": 310.5,
                    "positions_ms": [500.0, 1500.0],
                }
            )
        )
        saved = await p.until(lambda m: m["type"] == "glitch_saved")
        await p.until(lambda m: m["type"] == "underruns_saved")
        # a report for someone else's take is refused
        await ws.send(json.dumps({"type": "glitch", "take_id": "f" * 32, "position_ms": 1.0}))
        err = await p.until(lambda m: m["type"] == "report_error")
    assert err["message"] == "unknown take"
    assert any(m["type"] == "done" for m in p.json)
    take = server.state.store.load_take(tid)
    seams = [b * 1000 / take.sample_rate for b in take.boundaries]  # every 500 ms
    assert saved["boundary_index"] == 1 and saved["boundary_ms"] == pytest.approx(seams[1])
    assert saved["distance_ms"] == pytest.approx(1100.0 - seams[1])
    db = server.state.store.db
    row = db.execute(
        "SELECT kind, rater_id FROM glitch_reports WHERE report_id=?", ["r" * 32]
    ).fetchone()
    assert row[0] == "gap" and row[1].startswith("playground:")
    u = db.execute(
        "SELECT count, stall_ms, positions_ms FROM underruns WHERE take_id=?", [tid]
    ).fetchone()
    assert u[0] == 2 and u[1] == pytest.approx(310.5) and json.loads(u[2]) == [500.0, 1500.0]


async def test_voice_routes_and_sync_to_the_servers_voice_list(server, fault_url):
    wav = (ASSETS / "reference_joe.wav").read_bytes()
    async with httpx.AsyncClient(base_url=server.url) as c:
        bad = await c.post(
            "ll/api/voices",
            files={"file": ("x.wav", b"nope" * 100)},
            data={"name": "x", "ref_text": "t", "consent": "yes"},
        )
        assert bad.status_code == 400 and "not readable audio" in bad.json()["error"]
        r = await c.post(
            "ll/api/voices",
            files={"file": ("joe.wav", wav, "audio/wav")},
            data={"name": "../Joe", "ref_text": "The quick brown fox.", "consent": "yes"},
        )
        assert r.status_code == 200, r.text
        v = r.json()["voice"]
        assert v["name"] == "Joe"
        vid = v["voice_id"]
        assert (await c.post(f"ll/api/voices/{vid}/rename", json={"name": "Joey"})).json()["voice"][
            "name"
        ] == "Joey"
        assert (await c.get("ll/api/voices")).json()["voices"][0]["name"] == "Joey"
        assert (await c.delete("ll/api/voices/" + "0" * 32)).status_code == 404
    # speaking with it on a backend with a voice library uploads it there first
    async with websockets.connect(ws_url(server)) as ws:
        p = Page(ws)
        await p.speak(1, text="Hello.", backend="clone", voice="lib:" + vid)
        m = await p.until(lambda m: m["type"] in {"error", "done"})
    assert m["type"] == "done", m
    async with httpx.AsyncClient() as c:
        listed = (await c.get(fault_url + "/ok/v1/audio/voices")).json()
    uploaded = [u for u in listed["uploaded_voices"] if u["name"].startswith("ll_joey_")]
    assert len(uploaded) == 1 and uploaded[0].get("ref_text") == "The quick brown fox."
    take = server.state.store.load_take(m["take_id"])
    assert take.request.voice == uploaded[0]["name"]
    # deleting from the library deletes it on the server too
    async with httpx.AsyncClient(base_url=server.url) as c:
        assert (await c.delete(f"ll/api/voices/{vid}")).status_code == 200
        listed = (await httpx.AsyncClient().get(fault_url + "/ok/v1/audio/voices")).json()
    assert not [u for u in listed["uploaded_voices"] if u["name"].startswith("ll_joey_")]


async def test_gate_reports_positions_and_hands_slots_on_in_order():
    gate = Gate(1)
    seen: dict[str, list[int]] = {"b": [], "c": []}
    order: list[str] = []
    release = asyncio.Event()

    async def job(name: str):
        async with gate.slot(lambda p: seen.setdefault(name, []).append(p)):
            order.append(name)
            if name == "a":
                await release.wait()

    ta = asyncio.create_task(job("a"))
    await asyncio.sleep(0)
    tb = asyncio.create_task(job("b"))
    await asyncio.sleep(0)
    tc = asyncio.create_task(job("c"))
    await asyncio.sleep(0.01)
    assert seen["b"] == [1, 1] and seen["c"] == [2]
    tb.cancel()  # leaving the queue moves c up
    await asyncio.sleep(0.01)
    assert seen["c"] == [2, 1]
    release.set()
    await asyncio.gather(ta, tc, return_exceptions=True)
    assert order == ["a", "c"] and gate.active == 0 and gate.queued == 0


def test_backend_args():
    assert parse_backend_args(["piper", "fast=piper?speed=1.2", "piper?deterministic=1"]) == [
        ("piper", "piper"),
        ("fast", "piper?speed=1.2"),
        ("piper-2", "piper?deterministic=1"),
    ]


@pytest.mark.skipif(
    shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root unshare"
)
def test_serve_works_offline(tmp_path):
    """``listenlab serve`` in a network namespace with only loopback: page, config, speech."""
    port = free_port()
    driver = textwrap.dedent(
        f"""
        import asyncio, json, subprocess, sys, time, httpx, websockets
        env = dict(GRADIO_SERVER_PORT="{port}", **__import__("os").environ)
        srv = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--db",
                                "{tmp_path}/x.db"], env=env)
        try:
            for _ in range(300):
                try:
                    if httpx.get("http://127.0.0.1:{port}/ll/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            page = httpx.get("http://127.0.0.1:{port}/")
            async def speak():
                async with websockets.connect("ws://127.0.0.1:{port}/ll/ws") as ws:
                    await ws.send(json.dumps(dict(type="speak", token=1, text="Offline.")))
                    n = 0
                    while True:
                        m = await ws.recv()
                        if isinstance(m, bytes):
                            n += 1
                        elif json.loads(m)["type"] in ("done", "error"):
                            return json.loads(m)["type"], n
            print(json.dumps([page.status_code, *asyncio.run(speak())]))
        finally:
            srv.terminate(); srv.wait(10)
        """
    )
    r = subprocess.run(
        [
            "unshare",
            "-n",
            "sh",
            "-c",
            f'ip link set lo up && exec "{sys.executable}" -c "$0"',
            driver,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    status, kind, frames = json.loads(r.stdout.strip().splitlines()[-1])
    assert status == 200 and kind == "done" and frames >= 1


def test_db_defaults_and_journal_mode(monkeypatch, tmp_path):
    from app.config import resolve_db
    from app.store import journal_mode_for

    monkeypatch.delenv("LISTENLAB_DB", raising=False)
    monkeypatch.delenv("LISTENLAB_DATA", raising=False)
    assert resolve_db() == "data/listenlab.db"
    monkeypatch.setenv("LISTENLAB_DATA", str(tmp_path))
    assert resolve_db() == str(tmp_path / "listenlab.db")
    monkeypatch.setenv("LISTENLAB_DB", "/x/y.db")
    assert resolve_db() == "/x/y.db"
    assert journal_mode_for("/data/listenlab.db") == "delete"
    assert journal_mode_for("/database/listenlab.db") == "wal"
    assert journal_mode_for(tmp_path / "a.db") == "wal"


async def test_closing_the_page_stops_its_generation(server):
    n = len(server.tracked.events)
    async with websockets.connect(ws_url(server)) as ws:
        p = Page(ws)
        await p.speak(1, text=TEXT * 2, backend="slow")
        await p.until(lambda m: m["type"] == "start")
    for _ in range(200):
        if len(server.tracked.events) > n and server.state.backends["slow"].gate.active == 0:
            break
        await asyncio.sleep(0.05)
    assert server.tracked.events[n][0] == "closed"
    assert server.state.backends["slow"].gate.active == 0
