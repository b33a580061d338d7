"""Abuse a running server the way issue #11 did, and measure what it costs the server.

Servers run as child processes (``listenlab api --backend piper`` and ``listenlab serve``), so
their memory is read from ``/proc`` without this script's allocations. Through every phase a
thread GETs ``/health`` back to back (the longest answer is the "stall") and another samples
the server's RSS every 20 ms. Phases:

* ``bomb_header``  a FLAC of 1 h of 96 kHz stereo silence (1.4 MB, 2.8 GB as float32) sent as
  ``ref_audio`` (refused from its header)
* ``bomb_lying``   the same with "unknown length" in its header (refused by the decode cap)
* ``bomb_upload``  the lying bomb uploaded to the Playground's voice library
* ``big_bodies``   200 MB JSON bodies (declared, and chunked without a length), 100k-deep JSON
* ``ws_flood``     50 ``input.text`` messages of 120 KB on one speech WebSocket
* ``streams_32``   32 concurrent raw-PCM streams on ``listenlab api`` (FIFO queue, 2 at once)
* ``remote_64``    64 concurrent streams through the remote backend (``vllm-omni+http``, its
  default 20 s chunk timeout) to the same ``listenlab api``

Targets (issue #11): peak RSS growth < 200 MB, ``/health`` never blocked > 100 ms, 0 failed
streams. Writes ``benchmarks/results/abuse.json``.

Issue #19 (``--listening``, or ``--only-listening``): one ``listenlab serve`` with an admin
password, an open one-item test, two arena systems and 127.0.0.1 as its trusted proxy (so
visitors from several addresses can be made with ``X-Forwarded-For``, as behind a Space):

* ``stimulus_flood``  ~190-byte ``stimulus`` messages on a socket that never reads, 30 s
* ``event_flood``     1,500 ``play_event`` + 1,500 ``listen_glitch`` (DB rows written)
* ``shared_take``     Playground ``underruns`` naming a stimulus take (its underrun_count)
* ``arena_stuffing``  one address, a fresh cookie per battle, every vote for one system
  (leaderboard movement; then the admin drops the voter)
* ``arena_budget``    one address minting 15 cookies; then a newcomer
* ``admin_guessing``  120 wrong admin passwords, then the right one
* ``gradio_upload``   20 anonymous uploads to ``/gradio_api/upload``

Issue #38 (``--hardening``, or ``--only-hardening``), items 1-3 and 9, against child servers:

* ``batch_bomb``     the 47 KB batch: 32 items x 1,500 characters, speed 0.25, 192 kHz (the
  issue's server grew 1.1 GB in 11 s and kept generating)
* ``batch_queue``    ``listenlab api --concurrency 1 --max-queue 8``: a 24-item batch, and 8
  single requests sent while it runs (the issue's batch took 22 queue places: singles got 503)
* ``batch_leaves``   a 20-item batch whose client leaves after 4 s: the server's CPU seconds
  in the 10 s after, and a single request sent then (the issue's kept generating for 23 s)
* ``metrics_paths``  1,500 made-up URLs, then ``GET /metrics`` (the issue's scrape grew 2 KB ->
  1.5 MB, one series per URL)
* ``framing``        ``listenlab serve`` as on a Space (``SPACE_HOST``, an admin password):
  the framing headers of an admin page, and the admin's browser made to GET ``snapshot.zip``
  and ``export.zip`` from another site's page (``Sec-Fetch-Site: cross-site``, the admin's
  credentials), against the same GET from the admin's own page; ``Host: testserver``

    .venv/bin/python benchmarks/abuse.py [--listening | --only-listening] [--hardening |
        --only-hardening]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402
import pandas as pd  # noqa: E402

from tests.support.hardening_util import (  # noqa: E402
    HealthProbe,
    RssSampler,
    flac_bomb,
    rss_kb,
)
from tests.support.remote_util import listenlab_process  # noqa: E402

TARGETS = {"rss_growth_mb": 200, "health_stall_ms": 100, "failed_streams": 0}
TEXT = "Hello there, this is one of many voices speaking at once on a small machine."


def _bomb(lie: bool) -> bytes:
    cache = Path(tempfile.gettempdir()) / f"listenlab-abuse-bomb{'-lying' if lie else ''}.flac"
    if not cache.exists():
        cache.write_bytes(flac_bomb(3600, rate=96000, channels=2, lie=lie))
    return cache.read_bytes()


def _phase(name: str, pid: int, health_url: str, fn) -> dict:
    base = rss_kb(pid)
    with RssSampler(pid) as rss, HealthProbe(health_url) as probe:
        time.sleep(0.3)
        t0 = time.perf_counter()
        detail = fn() or {}
        secs = time.perf_counter() - t0
        time.sleep(0.3)
    out = {
        "phase": name,
        "seconds": round(secs, 2),
        "rss_before_mb": round(base / 1024, 1),
        "rss_peak_mb": round(rss.peak_kb / 1024, 1),
        "rss_growth_mb": round((rss.peak_kb - base) / 1024, 1),
        "health_checks": probe.count,
        "health_failures": probe.failures,
        "health_stall_ms": round(probe.max_ms, 1),
        **detail,
    }
    print(
        f"{name:12s} {secs:6.1f} s  RSS +{out['rss_growth_mb']:6.1f} MB (peak "
        f"{out['rss_peak_mb']:.0f} MB)  /health max {out['health_stall_ms']:6.1f} ms over "
        f"{probe.count} checks  {json.dumps(detail)}",
        flush=True,
    )
    return out


def _post_ref(url: str, data: bytes, n: int) -> dict:
    ref = "data:audio/flac;base64," + base64.b64encode(data).decode()
    codes = []
    for _ in range(n):
        r = httpx.post(
            url + "/v1/audio/speech",
            json={"input": "Hello.", "ref_audio": ref},
            timeout=120,
            trust_env=False,
        )
        codes.append(r.status_code)
    return {"bomb_bytes": len(data), "refused": sum(c == 400 for c in codes), "sent": n}


def _big_bodies(url: str) -> dict:
    codes = []

    def post(content) -> int | str:
        """The answer's status, or "closed" when the server hung up on the body."""
        try:
            r = httpx.post(
                url + "/v1/audio/speech",
                content=content,
                headers={"content-type": "application/json"},
                timeout=120,
                trust_env=False,
            )
        except httpx.HTTPError:
            return "closed"
        return r.status_code

    big = b"{" + b" " * (200 * 1024 * 1024 - 2) + b"}"
    for _ in range(3):
        codes.append(post(big))

    def chunks():
        for _ in range(200):
            yield b" " * (1024 * 1024)

    codes.append(post(chunks()))
    deep = "[" * 100_000 + "]" * 100_000
    for _ in range(10):
        r = httpx.post(
            url + "/v1/audio/speech",
            content=deep,
            headers={"content-type": "application/json"},
            trust_env=False,
        )
        codes.append(r.status_code)
    return {"answers": {str(c): codes.count(c) for c in set(codes)}}


def _ws_flood(url: str) -> dict:
    from websockets.asyncio.client import connect

    async def run() -> dict:
        errors = 0
        async with connect(
            url.replace("http", "ws") + "/v1/audio/speech/stream", max_size=2**24
        ) as ws:
            await ws.send(json.dumps({"type": "session.config", "response_format": "pcm"}))
            for _ in range(50):
                await ws.send(json.dumps({"type": "input.text", "text": "word " * 24_000}))
            await ws.send(json.dumps({"type": "session.close"}))
            async for m in ws:
                if isinstance(m, str) and json.loads(m).get("type") == "error":
                    errors += 1
        return {"messages": 50, "refused": errors}

    return asyncio.run(run())


def _streams(url: str, n: int) -> dict:
    async def one(c: httpx.AsyncClient) -> tuple[bool, float, float]:
        t0 = time.perf_counter()
        first = None
        try:
            async with c.stream(
                "POST",
                url + "/v1/audio/speech",
                json={"input": TEXT, "response_format": "pcm", "stream_format": "audio"},
            ) as r:
                if r.status_code != 200:
                    return False, 0.0, 0.0
                got = 0
                async for b in r.aiter_bytes():
                    first = first or time.perf_counter()
                    got += len(b)
            return got > 0, (first or t0) - t0, time.perf_counter() - t0
        except httpx.HTTPError:
            return False, 0.0, 0.0

    async def run():
        async with httpx.AsyncClient(timeout=httpx.Timeout(300), trust_env=False) as c:
            return await asyncio.gather(*(one(c) for _ in range(n)))

    res = asyncio.run(run())
    ok = [r for r in res if r[0]]
    return {
        "streams": n,
        "failed_streams": n - len(ok),
        "max_wait_first_audio_s": round(max((r[1] for r in ok), default=0), 2),
        "max_total_s": round(max((r[2] for r in ok), default=0), 2),
    }


def _remote(url: str, n: int) -> dict:
    from backends.registry import load_backend
    from evaluation.takes import record

    # The remote backend's defaults (SSE, wav, 60 s to first audio, 20 s between chunks).
    backend = load_backend(f"vllm-omni+http://{url[7:]}")

    async def one():
        from backends.base import SpeechRequest

        try:
            take = await record(backend, SpeechRequest(text=TEXT))
            return take.status == "ok" and take.frames > 0, take.ttfa_ms
        except Exception as e:
            return False, repr(e)[:120]

    async def run():
        await backend.health()  # learns the served model and its rate, as the app does
        try:
            return await asyncio.gather(*(one() for _ in range(n)))
        finally:
            await backend.aclose()

    res = asyncio.run(run())
    fails = [r[1] for r in res if not r[0]]
    return {
        "streams": n,
        "failed_streams": len(fails),
        "errors": sorted(set(map(str, fails)))[:5],
        "max_ttfa_s": round(max((r[1] for r in res if r[0]), default=0) / 1000, 2),
    }


def _upload_bomb(url: str, data: bytes) -> dict:
    codes = []
    for _ in range(3):
        r = httpx.post(
            url + "/ll/api/voices",
            files={"file": ("bomb.flac", data, "audio/flac")},
            data={"name": "bomb", "ref_text": "x", "consent": "yes"},
            timeout=120,
            trust_env=False,
        )
        codes.append(r.status_code)
    return {"refused": codes.count(400), "sent": len(codes)}


# --------------------------------------------------------------------------- issue #19

PW = "bench-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
STIM_TEXT = (
    "The birch canoe slid on the smooth planks, glued the sheet to the dark blue background."
)


def _stored_rows(db: Path, table: str, **where: str) -> list[dict]:
    """The rows of ``table`` whose columns equal ``where``, read the way ``listenlab report``
    reads a live DB: a read-only store (no SQL outside the store, and nothing written)."""
    from app.store import Store

    with Store.open(db, read_only=True) as store:
        df = store.frame(table)
    for col, value in where.items():
        df = df[df[col] == value]
    return df.to_dict("records")


def _rater(url: str, test_id: str):
    from tests.support.rater import RaterClient

    async def go():
        c = RaterClient(url, test_id)
        await c.join()
        return c, (await c.status())["item"]["assignment_id"]

    return go()


def _stimulus_flood(url: str, test_id: str) -> dict:
    from tests.support.hardening_util import stimulus_flood

    async def go():
        c, aid = await _rater(url, test_id)
        msg = json.dumps({"type": "stimulus", "token": 1, "test_id": test_id,
                          "rater_token": c.token, "assignment_id": aid, "slot": 0})  # fmt: skip
        out = await stimulus_flood(url, msg, seconds=30)
        await c.aclose()
        return out

    sent, blocked, closed = asyncio.run(go())
    return {"messages_sent": sent, "send_blocked_after_s": blocked, "dropped_after_s": closed}


def _event_flood(url: str, test_id: str, db: Path) -> dict:
    from tests.support.hardening_util import recv_json

    async def go():
        c, aid = await _rater(url, test_id)
        await c.listen(aid, 0, realtime=False, report=False)
        ws = c.ws
        t0 = time.perf_counter()
        for i in range(1500):
            base = {"test_id": test_id, "rater_token": c.token, "assignment_id": aid, "slot": 0}
            await ws.send(json.dumps({"type": "play_event", **base, "played_ms": 100 + i}))
            await ws.send(json.dumps({"type": "listen_glitch", **base, "position_ms": 100 + i,
                                      "report_id": f"r{i}"}))  # fmt: skip
        refused = 0
        for _ in range(3000):
            refused += (await recv_json(ws, lambda d: d["type"] != "pong"))[
                "type"
            ] == "listen_error"
        secs = time.perf_counter() - t0
        rid = (await c.status())["rater_id"]
        await c.aclose()
        return rid, refused, secs

    rid, refused, secs = asyncio.run(go())
    plays = len(_stored_rows(db, "play_events", rater_id=rid))
    marks = len(_stored_rows(db, "glitch_reports", rater_id=rid))
    return {"messages": 3000, "refused": refused, "rows_written": plays + marks,
            "play_events": plays, "glitch_reports": marks, "flood_s": round(secs, 2)}  # fmt: skip


def _shared_take(url: str, test_id: str, db: Path) -> dict:
    from tests.support.hardening_util import recv_json

    async def go():
        c, aid = await _rater(url, test_id)
        await c.listen(aid, 0, realtime=False, report=False)
        # the page is sent only an opaque stream id; the worst case knows the take id anyway
        (row,) = _stored_rows(db, "assignments", assignment_id=aid)
        take = row["take_id"]
        await c.ws.send(json.dumps({"type": "underruns", "take_id": take, "count": 999999,
                                    "stall_ms": 1e6, "positions_ms": [1.0]}))  # fmt: skip
        r = await recv_json(c.ws, lambda d: d["type"] in {"report_error", "underruns_saved"})
        await c.aclose()
        return take, r

    tid, r = asyncio.run(go())
    (row,) = _stored_rows(db, "takes", take_id=tid)
    count = 0 if pd.isna(row["underrun_count"]) else int(row["underrun_count"])
    return {"answer": r["type"], "message": r.get("message"), "take_underrun_count": count}


def _board(url: str, system: str) -> float | None:
    b = httpx.get(url + "/ll/arena/api/leaderboard", timeout=60, trust_env=False).json()
    rows = {r["system"]: r for r in b["listed"] + b["preliminary"]}
    return rows[system]["rating"] if system in rows else None


def _arena_battles(url: str, db: Path, ips: list[str], vote_for: str) -> list[dict]:
    """One honest-looking battle per address in ``ips`` (a fresh cookie each), voting for
    ``vote_for`` (a system name) or ``a``/``b``."""
    from tests.support.hardening_util import ArenaPage, arena_cookie, arena_page

    def pick(bid: str) -> str:
        return "a" if _stored_battle(db, bid).system_a == vote_for else "b"

    async def one(ip: str) -> dict:
        async with arena_page(url, arena_cookie(url), {"X-Forwarded-For": ip}) as ws:
            p = ArenaPage(ws)
            await p.until(lambda d: d["type"] == "hello")
            _bid, v = await p.battle_and_vote(pick if vote_for not in ("a", "b") else vote_for)
            return v

    async def go():
        return [await one(ip) for ip in ips]

    return asyncio.run(go())


def _stored_battle(db: Path, battle_id: str):
    """The battle as the server stored it (the attacker's worst case: it knows the names)."""
    from app.store import Store

    with Store.open(db, read_only=True) as store:
        return store.arena.battle(battle_id)


def _last_voter(db: Path) -> str | None:
    """The voter hash of the last vote stored."""
    from app.store import Store

    with Store.open(db, read_only=True) as store:
        votes = store.arena.votes_frame()
    return None if votes.empty else str(votes["voter"].iloc[-1])


def _arena_stuffing(url: str, db: Path) -> dict:
    # six honest votes from six addresses (alternating), then one address stuffs for "beta"
    honest = _arena_battles(url, db, [f"198.51.100.{i}" for i in range(1, 7)], "a")
    r0 = _board(url, "beta")
    stuff = _arena_battles(url, db, ["203.0.113.66"] * 6, "beta")
    r1 = _board(url, "beta")
    counted = sum(v.get("counted") is True for v in stuff)
    voter = _last_voter(db)
    drop = httpx.post(f"{url}/ll/arena/api/voters/{voter}/drop", headers=ADMIN, trust_env=False)
    r2 = _board(url, "beta")
    return {
        "honest_votes": sum(v.get("counted") is True for v in honest),
        "stuffing_votes_sent": len(stuff),
        "stuffing_votes_counted": counted,
        "refusals": sorted({v.get("reason") for v in stuff if v["type"] == "arena_error"}),
        "beta_rating_before": r0,
        "beta_rating_after_stuffing": r1,
        "leaderboard_movement": None if r0 is None or r1 is None else round(r1 - r0, 1),
        "votes_dropped_by_admin": drop.json().get("votes_dropped"),
        "beta_rating_after_drop": r2,
    }


def _arena_budget(url: str) -> dict:
    from tests.support.hardening_util import ArenaPage, arena_cookie, arena_page

    async def new(ip: str) -> dict:
        async with arena_page(url, arena_cookie(url), {"X-Forwarded-For": ip}) as ws:
            p = ArenaPage(ws)
            await p.until(lambda d: d["type"] == "hello")
            return await p.ask("arena_new", text="Hello there, arena.")

    async def go():
        mine = [await new("203.0.113.77") for _ in range(15)]
        return mine, await new("198.51.100.99")

    mine, newcomer = asyncio.run(go())
    return {
        "cookies_minted": 15,
        "battles_granted": sum(m["type"] == "arena_battle" for m in mine),
        "newcomer_admitted": newcomer["type"] == "arena_battle",
    }


def _admin_guessing(url: str) -> dict:
    h = {"X-Forwarded-For": "203.0.113.88"}
    t0 = time.perf_counter()
    codes = [
        httpx.post(
            url + "/ll/admin/login", data={"password": f"g{i}"}, headers=h, trust_env=False
        ).status_code  # fmt: skip
        for i in range(120)
    ]
    secs = time.perf_counter() - t0
    right = httpx.post(url + "/ll/admin/login", data={"password": PW}, headers=h, trust_env=False)
    other = httpx.post(url + "/ll/admin/login", data={"password": PW},
                       headers={"X-Forwarded-For": "198.51.100.5"}, trust_env=False)  # fmt: skip
    return {
        "tries": 120,
        "seconds": round(secs, 2),
        "passwords_checked": codes.count(403),
        "refused_unchecked_429": codes.count(429),
        "right_password_same_client": right.status_code,
        "retry_after_s": right.headers.get("retry-after"),
        "right_password_other_client": other.status_code,
    }


def _gradio_upload(url: str) -> dict:
    codes = [
        httpx.post(
            url + "/gradio_api/upload", files={"files": ("a.txt", b"x" * 1000)}, trust_env=False
        ).status_code  # fmt: skip
        for _ in range(20)
    ]
    cors = httpx.get(url + "/config", headers={"Origin": "http://localhost:9"}, trust_env=False)
    return {
        "uploads": 20,
        "answers": {str(c): codes.count(c) for c in set(codes)},
        "foreign_origin_cors_headers": sorted(
            k for k in cors.headers if k.lower().startswith("access-control-allow")
        ),
    }


def listening_phases() -> list[dict]:
    db = Path(tempfile.mkdtemp(prefix="ll-abuse-19-")) / "lab.db"
    env = {"LISTENLAB_ADMIN_PASSWORD": PW, "LISTENLAB_TRUSTED_PROXIES": "127.0.0.1",
           "LISTENLAB_ARENA_VOTES_PER_HOUR": "3"}  # fmt: skip
    phases = []
    with listenlab_process(
        "serve", "--backend", "alpha=piper?deterministic=1",
        "--backend", "beta=piper?deterministic=1&profile=qwen3-tts",
        "--db", str(db), health="/ll/health", env=env,
    ) as pg:  # fmt: skip
        r = httpx.post(pg.url + "/ll/admin/tests", headers=ADMIN, timeout=600, trust_env=False,
                       json={"name": "abuse", "kind": "mos", "items_per_rater": 1,
                             "headphone_check": False, "screening": False, "prompts": [STIM_TEXT],
                             "systems": [{"name": "a", "backend": "alpha", "condition": "whole"}]})  # fmt: skip
        r.raise_for_status()
        tid = r.json()["test_id"]
        h = pg.url + "/ll/health"
        for name, fn in (
            ("stimulus_flood", lambda: _stimulus_flood(pg.url, tid)),
            ("event_flood", lambda: _event_flood(pg.url, tid, db)),
            ("shared_take", lambda: _shared_take(pg.url, tid, db)),
            ("arena_stuffing", lambda: _arena_stuffing(pg.url, db)),
            ("arena_budget", lambda: _arena_budget(pg.url)),
            ("admin_guessing", lambda: _admin_guessing(pg.url)),
            ("gradio_upload", lambda: _gradio_upload(pg.url)),
        ):
            phases.append(_phase(name, pg.pid, h, fn))
    return phases


# --------------------------------------------------------------------------- issue #38

BATCH_ATTACK = {  # the 47 KB request
    "items": [{"input": ("All work and no play makes a dull voice. " * 37)[:1500]}] * 32,
    "speed": 0.25,
    "sample_rate": 192000,
    "response_format": "wav",
}
SPACE_HOST = "bench-study.hf.space"


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _batch_bomb(url: str) -> dict:
    t0 = time.perf_counter()
    r = httpx.post(url + "/v1/audio/speech/batch", json=BATCH_ATTACK, timeout=120, trust_env=False)
    ms = (time.perf_counter() - t0) * 1000
    load = httpx.get(url + "/load", trust_env=False).json()["server_load"]
    return {
        "request_bytes": len(json.dumps(BATCH_ATTACK)),
        "status": r.status_code,
        "message": r.json().get("error", {}).get("message") if r.status_code != 200 else None,
        "answer_ms": round(ms, 1),
        "server_load_after": load,
    }


def _batch_queue(url: str) -> dict:
    """A 24-item batch on one slot with 8 queue places, and 8 singles sent while it runs."""
    import threading

    out: dict = {}

    def batch() -> None:
        body = {"items": [{"input": f"Item number {i}."} for i in range(24)]}
        body["response_format"] = "pcm"
        r = httpx.post(url + "/v1/audio/speech/batch", json=body, timeout=600, trust_env=False)
        out["batch_status"] = r.status_code
        out["batch_succeeded"] = r.json().get("succeeded") if r.status_code == 200 else None
        out["batch_end"] = time.perf_counter()

    def single(i: int, codes: list, ends: list) -> None:
        r = httpx.post(url + "/v1/audio/speech", json={"input": f"Single request {i}."},
                       timeout=600, trust_env=False)  # fmt: skip
        codes.append(r.status_code)
        ends.append(time.perf_counter())

    t0 = time.perf_counter()
    tb = threading.Thread(target=batch)
    tb.start()
    time.sleep(1.0)  # the batch is running
    codes: list = []
    ends: list = []
    singles = [threading.Thread(target=single, args=(i, codes, ends)) for i in range(8)]
    for t in singles:
        t.start()
    for t in [*singles, tb]:
        t.join()
    return {
        "batch_items": 24,
        "batch_status": out["batch_status"],
        "batch_succeeded": out["batch_succeeded"],
        "batch_s": round(out["batch_end"] - t0, 2),
        "singles": 8,
        "singles_answers": {str(c): codes.count(c) for c in set(codes)},
        "singles_done_before_batch": sum(e < out["batch_end"] for e in ends),
    }


def _batch_leaves(url: str, pid: int) -> dict:
    """A batch whose client leaves after 4 s: what the server keeps doing for it."""
    import socket

    items = [{"input": f"Sentence number {i} of a long batch, spoken slowly."} for i in range(20)]
    body = json.dumps({"items": items}).encode()
    host, port = url[len("http://") :].split(":")
    s = socket.create_connection((host, int(port)))
    s.sendall(
        b"POST /v1/audio/speech/batch HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    time.sleep(4.0)
    s.close()
    left = time.perf_counter()
    cpu0 = _cpu_s(pid)
    idle_after = None
    with httpx.Client(trust_env=False, timeout=30) as c:
        while time.perf_counter() - left < 10:
            if idle_after is None and c.get(url + "/load").json()["server_load"] == 0:
                idle_after = time.perf_counter() - left
            time.sleep(0.05)
        cpu_10s = _cpu_s(pid) - cpu0
        t0 = time.perf_counter()
        r = c.post(url + "/v1/audio/speech", json={"input": "Are you free now?"}, timeout=120)
        single_s = time.perf_counter() - t0
    return {
        "batch_items": 20,
        "client_left_after_s": 4.0,
        "server_idle_after_s": None if idle_after is None else round(idle_after, 2),
        "server_cpu_s_in_10_s_after": round(cpu_10s, 2),
        "single_after_status": r.status_code,
        "single_after_s": round(single_s, 2),
    }


def _metrics_paths(url: str) -> dict:
    prefix = "listenlab_api_requests_total{"
    with httpx.Client(trust_env=False, timeout=30) as c:
        before = c.get(url + "/metrics").text
        codes = [c.get(f"{url}/made/up/{i}").status_code for i in range(1500)]
        after = c.get(url + "/metrics").text

    def series(text: str) -> int:
        return sum(ln.startswith(prefix) for ln in text.splitlines())

    return {
        "made_up_urls": 1500,
        "answers": {str(x): codes.count(x) for x in set(codes)},
        "series_before": series(before),
        "series_after": series(after),
        "scrape_bytes_before": len(before),
        "scrape_bytes_after": len(after),
    }


def _framing(url: str, test_id: str) -> dict:
    other_site = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors",
                  "Sec-Fetch-Dest": "iframe"}  # fmt: skip
    out: dict = {}
    with httpx.Client(trust_env=False, timeout=300, headers=ADMIN) as c:
        page = c.get(url + "/admin/tests", headers={"Sec-Fetch-Site": "same-origin"})
        out["admin_page_csp"] = page.headers.get("content-security-policy")
        out["admin_page_x_frame_options"] = page.headers.get("x-frame-options")
        for name, path in (("snapshot", "/ll/admin/snapshot.zip"),
                           ("export", f"/ll/admin/tests/{test_id}/export.zip")):  # fmt: skip
            codes, worst = [], 0.0
            for _ in range(10):
                t0 = time.perf_counter()
                codes.append(c.get(url + path, headers=other_site).status_code)
                worst = max(worst, (time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            own = c.get(url + path, headers={"Sec-Fetch-Site": "same-origin"})
            out[name] = {
                "cross_site_gets": 10,
                "answers": {str(x): codes.count(x) for x in set(codes)},
                "cross_site_max_ms": round(worst, 1),
                "own_page_status": own.status_code,
                "own_page_bytes": len(own.content),
                "own_page_ms": round((time.perf_counter() - t0) * 1000, 1),
            }
        out["host_testserver"] = c.get(
            url + "/ll/health", headers={"Host": "testserver"}
        ).status_code
    return out


def hardening_block() -> dict:
    """The #38 phases with the machine's load around them."""
    load0 = os.getloadavg()[0]
    phases = hardening_phases()
    return {
        "loadavg_1m_before_after": [round(load0, 1), round(os.getloadavg()[0], 1)],
        "note": "measured on a 2-core machine shared with other agents",
        "phases": phases,
    }


def hardening_phases() -> list[dict]:
    """Issue #38's attacks on the batch route, /metrics and framing, each against a child."""
    phases = []
    with listenlab_process("api", "--backend", "piper?deterministic=1", health="/health") as api:
        h = api.url + "/health"
        phases.append(_phase("batch_bomb", api.pid, h, lambda: _batch_bomb(api.url)))
        phases.append(_phase("batch_leaves", api.pid, h, lambda: _batch_leaves(api.url, api.pid)))
        phases.append(_phase("metrics_paths", api.pid, h, lambda: _metrics_paths(api.url)))
    with listenlab_process("api", "--backend", "piper?deterministic=1", "--concurrency", "1",
                           "--max-queue", "8", health="/health") as api:  # fmt: skip
        phases.append(_phase("batch_queue", api.pid, api.url + "/health",
                             lambda: _batch_queue(api.url)))  # fmt: skip
    db = Path(tempfile.mkdtemp(prefix="ll-abuse-38-")) / "lab.db"
    env = {"LISTENLAB_ADMIN_PASSWORD": PW, "SPACE_HOST": SPACE_HOST}
    with listenlab_process("serve", "--backend", "alpha=piper?deterministic=1", "--db", str(db),
                           health="/ll/health", env=env) as pg:  # fmt: skip
        r = httpx.post(pg.url + "/ll/admin/tests", headers=ADMIN, timeout=600, trust_env=False,
                       json={"name": "framing", "kind": "mos", "items_per_rater": 1,
                             "headphone_check": False, "screening": False, "prompts": [STIM_TEXT],
                             "systems": [{"name": "a", "backend": "alpha", "condition": "whole"}]})  # fmt: skip
        r.raise_for_status()
        tid = r.json()["test_id"]
        phases.append(_phase("framing", pg.pid, pg.url + "/ll/health",
                             lambda: _framing(pg.url, tid)))  # fmt: skip
    return phases


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/abuse.json"))
    p.add_argument("--skip-playground", action="store_true")
    p.add_argument("--listening", action="store_true", help="also the issue #19 attacks")
    p.add_argument(
        "--only-listening",
        action="store_true",
        help="only the issue #19 attacks (kept beside the other phases in the JSON)",
    )
    p.add_argument("--hardening", action="store_true", help="also the issue #38 attacks")
    p.add_argument(
        "--only-hardening",
        action="store_true",
        help="only the issue #38 attacks (kept beside the other phases in the JSON)",
    )
    args = p.parse_args()
    out = Path(args.out)
    if args.only_hardening:
        report = json.loads(out.read_text()) if out.exists() else {}
        report["hardening"] = hardening_block()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(f"-> {out}")
        return 0
    if args.only_listening:
        report = json.loads(out.read_text()) if out.exists() else {}
        load0 = os.getloadavg()[0]
        report["listening"] = {
            "loadavg_1m_before_after": [round(load0, 1), round(os.getloadavg()[0], 1)],
            "note": "measured on a 2-core machine shared with ~6 other agents",
            "phases": listening_phases(),
        }
        report["listening"]["loadavg_1m_before_after"][1] = round(os.getloadavg()[0], 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1), encoding="utf-8")
        print(f"-> {out}")
        return 0
    print("building the bombs (cached in the temp folder)...", flush=True)
    bomb, lying = _bomb(False), _bomb(True)
    load_before = os.getloadavg()
    phases = []
    with listenlab_process("api", "--backend", "piper", health="/health") as api:
        h = api.url + "/health"
        phases.append(_phase("bomb_header", api.pid, h, lambda: _post_ref(api.url, bomb, 5)))
        phases.append(_phase("bomb_lying", api.pid, h, lambda: _post_ref(api.url, lying, 5)))
        phases.append(_phase("big_bodies", api.pid, h, lambda: _big_bodies(api.url)))
        phases.append(_phase("ws_flood", api.pid, h, lambda: _ws_flood(api.url)))
        phases.append(_phase("streams_32", api.pid, h, lambda: _streams(api.url, 32)))
        phases.append(_phase("remote_64", api.pid, h, lambda: _remote(api.url, 64)))
    if not args.skip_playground:
        db = Path(tempfile.mkdtemp(prefix="ll-abuse-")) / "lab.db"
        with listenlab_process(
            "serve", "--backend", "piper", "--db", str(db), health="/ll/health"
        ) as pg:
            phases.append(
                _phase(
                    "bomb_upload",
                    pg.pid,
                    pg.url + "/ll/health",
                    lambda: _upload_bomb(pg.url, lying),
                )
            )
    worst = {
        "rss_growth_mb": max(ph["rss_growth_mb"] for ph in phases),
        "health_stall_ms": max(ph["health_stall_ms"] for ph in phases),
        "failed_streams": sum(ph.get("failed_streams", 0) for ph in phases),
        "health_failures": sum(ph["health_failures"] for ph in phases),
    }
    met = {k: worst[k] <= v if k == "failed_streams" else worst[k] < v for k, v in TARGETS.items()}
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_1m_before_after": [round(load_before[0], 1), round(os.getloadavg()[0], 1)],
            "python": platform.python_version(),
            "note": "2-core machine shared with other work; the /health stall includes CPU "
            "contention from Piper generating in the same process",
        },
        "targets": TARGETS,
        "worst": worst,
        "met": met,
        "phases": phases,
    }
    if args.listening:
        report["listening"] = {"phases": listening_phases()}
    if args.hardening:
        report["hardening"] = hardening_block()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(f"worst: {json.dumps(worst)}  targets met: {json.dumps(met)}  -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
