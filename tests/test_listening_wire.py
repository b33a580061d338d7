"""Blind on the wire: what a rater's page receives says nothing about which system it hears.

Real parts: uvicorn on 127.0.0.1, a real SQLite file, the real Piper voice. The systems differ on
purpose in every way the wire used to show: imported WAV/FLAC files (``"stimuli"`` folder, as
``listenlab test create --stimuli DIR``) at 22.05 kHz mono, 16 kHz mono and 48 kHz stereo, the
Piper voice on Qwen3-TTS's wire profile (24 kHz, its own chunking) replayed *as streamed*, and
the Piper voice generated *live*. A scripted page (raw WebSocket) records every message.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
import soxr

from backends.base import SpeechRequest
from evaluation.loudness import measure_lufs
from tests.support.app_util import create_test, listening_app, live_server
from tests.support.rater import RaterClient

PW = "wire-admin-pw"
ADMIN = {"Authorization": f"Bearer {PW}"}
TEXTS = {
    "w1": "The birch canoe slid on the smooth planks.",
    "w2": "Glue the sheet to the dark blue background.",
}
IMPORTED = {"natural": (22050, 1), "sysmono16": (16000, 1), "sysstereo48": (48000, 2)}
GENERATED = [
    {"name": "genqwen", "backend": "qwen", "condition": "as_streamed"},
    {"name": "genlive", "backend": "piper", "condition": "live"},
]
HEADER = struct.Struct("<IIf")


def make_folder(root: Path, piper) -> Path:
    """One folder per imported system, each at its own rate / channel count and level."""
    for sid, (rate, ch) in IMPORTED.items():
        (root / sid).mkdir(parents=True)
        for i, (pid, text) in enumerate(TEXTS.items()):
            a = asyncio.run(piper.synthesize(SpeechRequest(text=text)))
            x = soxr.resample(a.samples[:, 0].astype(np.float32) / 32768.0, a.sample_rate, rate)
            x = x * 10 ** ((-3 * i - (6 if ch == 2 else 0)) / 20)  # levels differ on purpose
            y = np.stack([x, 0.8 * x], 1) if ch == 2 else x
            sf.write(root / sid / f"{pid}.{'flac' if ch == 2 else 'wav'}", y, rate)
    rows = "".join(f'{k},"{v}"\n' for k, v in TEXTS.items())
    (root / "prompts.csv").write_text("prompt_id,text\n" + rows)
    return root


@pytest.fixture(scope="module")
def live():
    with live_server(listening_app(PW)) as lv:
        yield lv


@pytest.fixture(scope="module")
def folder(tmp_path_factory, piper_det) -> Path:
    return make_folder(tmp_path_factory.mktemp("wire") / "study", piper_det)


async def stream(ws, tok: int, msg: dict, *, stop_after: int | None = None) -> dict:
    """Ask for one stimulus and record everything the page is sent for it."""
    await ws.send(json.dumps({"type": "stimulus", "token": tok, **msg}))
    out = {"json": [], "frames": [], "t": []}
    t0 = time.monotonic()
    while True:
        m = await ws.recv()
        if isinstance(m, bytes):
            if HEADER.unpack_from(m)[0] == tok:
                out["frames"].append(m)
                out["t"].append(time.monotonic() - t0)
                if stop_after is not None and len(out["frames"]) == stop_after:
                    await ws.send(json.dumps({"type": "stop", "token": tok}))
            continue
        d = json.loads(m)
        if d.get("token") != tok:
            continue
        out["json"].append(d)
        if d["type"] in {"done", "error", "cancelled"}:
            return out


def by_type(rec: dict, kind: str) -> dict:
    return next(d for d in rec["json"] if d["type"] == kind)


def wire_test(live, folder: Path, kind: str, systems: list[dict], **kw) -> str:
    """A test on the imported folder (+ ``systems``), no screening, no headphone check."""
    return create_test(
        live,
        ADMIN,
        kind=kind,
        systems=systems,
        prompts=[],
        stimuli=str(folder),
        screening=False,
        headphone_check=False,
        **kw,
    )


async def first_screen(live, tid: str):
    """A new rater's socket, first assignment and the fields of a stimulus message."""
    c = RaterClient(live.url, tid)
    await c.join()
    rid = (await c.status())["rater_id"]
    a = live.state.store.assignments(tid, rid)[0]
    msg = {"test_id": tid, "rater_token": c.token, "assignment_id": a.assignment_id}
    return c, a, await c._socket(), msg


@pytest.fixture(scope="module")
def mos(live, folder):
    """A MOS test with all five systems on both prompts; one rater streams every item."""
    tid = wire_test(live, folder, "mos", GENERATED, items_per_rater=10)

    async def go():
        c = RaterClient(live.url, tid)
        await c.join()
        rid = (await c.status())["rater_id"]
        ws = await c._socket()
        got = []
        for k, a in enumerate(live.state.store.assignments(tid, rid)):
            msg = {"test_id": tid, "rater_token": c.token, "assignment_id": a.assignment_id}
            rec = await stream(ws, 100 + k, {**msg, "slot": 0})
            got.append((a.meta["systems"][0], a.condition, rec))
        await c.aclose()
        return got

    return tid, asyncio.run(go())


def test_every_system_reaches_the_page_in_one_format_and_equal_frames(live, mos):
    tid, got = mos
    assert {s for s, _c, _r in got} == set(IMPORTED) | {g["name"] for g in GENERATED}
    starts = [by_type(r, "start") for _s, _c, r in got]
    dones = [by_type(r, "done") for _s, _c, r in got]
    # no field name or value differs between systems but the token and the opaque stream id
    assert {
        json.dumps({k: v for k, v in s.items() if k not in {"token", "stream_id"}}) for s in starts
    } == {json.dumps({"type": "start", "sample_rate": 48000, "channels": 2})}
    assert {tuple(sorted(d)) for d in dones} == {
        ("duration_s", "frames", "status", "token", "type")
    }
    assert {d["status"] for d in dones} == {"ok"}
    for _s, _c, r in got:  # no other message type (findings, ...), nothing in the others
        assert {d["type"] for d in r["json"]} <= {"queued", "generating", "start", "done"}
        for d in r["json"]:
            if d["type"] in {"queued", "generating"}:
                assert set(d) <= {"type", "token", "stream_id"}
    # every frame: 100 ms of 48 kHz stereo int16 (+ the 12-byte header), the last one padded
    size = 12 + 4800 * 2 * 2
    sizes = {len(f) for _s, _c, r in got for f in r["frames"]}
    assert sizes == {size}
    for system, cond, r in got:
        heads = [HEADER.unpack_from(f) for f in r["frames"]]
        assert [h[1] for h in heads] == list(range(len(heads)))  # index = frame number
        assert by_type(r, "done")["frames"] == len(heads)
        if cond != "as_streamed":
            assert {h[2] for h in heads} == {0.0}, system  # no timeline to show
    # the as-streamed system keeps its recorded timeline (frames still uniform)
    qwen = [r for s, _c, r in got if s == "genqwen"]
    assert all(max(HEADER.unpack_from(f)[2] for f in r["frames"]) > 0 for r in qwen)


def test_stream_ids_are_opaque_and_never_take_ids(live, mos):
    tid, got = mos
    ids = [by_type(r, "start")["stream_id"] for _s, _c, r in got]
    assert len(set(ids)) == len(ids)
    takes = {r[0] for r in live.state.store.db.execute("SELECT take_id FROM takes")}
    assert not set(ids) & takes
    text = json.dumps([r["json"] for _s, _c, r in got])
    assert not any(t in text for t in takes)


def test_every_system_is_heard_at_the_same_loudness(mos):
    """Stimuli are normalised when made (-23 LUFS); the as-streamed replay of the recorded chunks
    and the live generation (gain-matched on the way) arrive at it too."""
    _tid, got = mos
    for system, cond, r in got:
        pcm = np.concatenate([np.frombuffer(f[12:], "<i2") for f in r["frames"]]).reshape(-1, 2)
        lufs = measure_lufs(pcm, 48000)
        assert abs(lufs - -23.0) < 1.5, (system, cond, lufs)


def test_the_open_reference_and_the_hidden_reference_are_different_streams(live, folder):
    tid = wire_test(live, folder, "mushra", [GENERATED[0]], reference="natural", items_per_rater=1)

    async def go():
        c, a, ws, msg = await first_screen(live, tid)
        hidden = a.meta["roles"].index("reference")
        out = {}
        for k, slot in enumerate([-1, hidden] + [i for i in range(len(a.slots)) if i != hidden]):
            out[slot] = await stream(ws, 200 + k, {**msg, "slot": slot, "delivery": "whole"})
        await c.aclose()
        return a, out

    a, out = asyncio.run(go())
    hidden = a.meta["roles"].index("reference")
    ref, hid = by_type(out[-1], "start"), by_type(out[hidden], "start")
    assert ref["stream_id"] != hid["stream_id"]
    # the same audio (so a rater can find the reference by listening, as intended), nothing else
    assert b"".join(f[12:] for f in out[-1]["frames"]) == b"".join(
        f[12:] for f in out[hidden]["frames"]
    )
    starts = [
        {k: v for k, v in by_type(r, "start").items() if k not in {"token", "stream_id"}}
        for r in out.values()
    ]
    assert all(s == starts[0] for s in starts) and starts[0]["sample_rate"] == 48000


def test_config_reveals_no_rate_of_a_system_under_test(live, mos):
    """``/ll/api/config`` is the Playground's (its backends and their native rates); the rater
    page never asks for it, and it names no system of the test."""
    tid, _got = mos
    cfg = httpx.get(live.url + "ll/api/config").text
    for sid in list(IMPORTED) + [g["name"] for g in GENERATED]:
        if sid != "natural":
            assert sid not in cfg
    assert tid not in cfg
    page = httpx.get(live.url + f"listen/{tid}").text
    assert "api/config" not in page
    from evaluation.listening.kinds import NAMES

    scripts = ["ll/listening/static/listen.js", "ll/static/player-core.js"]
    for js in scripts + [f"ll/listening/kinds/{k}/page.js" for k in NAMES]:
        r = httpx.get(live.url + js)
        assert r.status_code == 200 and "api/config" not in r.text, js


def test_a_stopped_stream_earns_no_completion(live):
    """Stopped before the server sent all of it: the play event is capped by the audio that was
    sent, is never complete, and the vote stays locked."""
    tid = create_test(
        live,
        ADMIN,
        systems=[{"name": "s", "backend": "stall"}],
        prompts=["A large size in stockings is hard to sell, and the stall is in the middle."],
        items_per_rater=1,
        screening=False,
        headphone_check=False,
    )

    async def go():
        c, a, ws, msg = await first_screen(live, tid)
        aid = a.assignment_id
        rec = await stream(ws, 300, {**msg, "slot": 0}, stop_after=3)
        await asyncio.sleep(1.0)
        ev = await c.play_event(aid, 0, 60_000)
        vote = await c.vote({"assignment_id": aid, "score": 4})
        await c.aclose()
        return rec, ev, vote

    rec, ev, vote = asyncio.run(go())
    assert rec["json"][-1] == {
        "type": "cancelled",
        "token": 300,
        "stream_id": by_type(rec, "start")["stream_id"],
    }
    sent_ms = len(rec["frames"]) * 100.0
    assert ev["type"] == "play_saved" and 0 < ev["played_ms"] <= sent_ms + 1e-6
    row = live.state.store.db.execute(
        "SELECT played_ms, complete FROM play_events WHERE test_id=?", [tid]
    ).fetchone()
    assert row[0] == pytest.approx(ev["played_ms"]) and row[1] == 0
    assert vote.status_code == 409 and "listen first" in vote.json()["detail"]


def test_whole_delivery_is_only_for_mushra_screens(live, mos):
    tid, _got = mos

    async def go():
        c, _a, ws, msg = await first_screen(live, tid)
        rec = await stream(ws, 400, {**msg, "slot": 0, "delivery": "whole"})
        await c.aclose()
        return rec

    rec = asyncio.run(go())
    assert rec["json"][-1]["type"] == "error" and "MUSHRA" in rec["json"][-1]["message"]
    assert not rec["frames"]


def test_mushra_credit_is_capped_by_the_screens_wall_time(live, folder):
    """A MUSHRA screen is sent whole; its slots' credit counts only once all of it was sent, and
    the credit summed over its slots never exceeds the wall time since then (one plays at a
    time)."""
    tid = wire_test(live, folder, "mushra", [GENERATED[0]], reference="natural", items_per_rater=1)

    async def go():
        c, a, ws, msg = await first_screen(live, tid)
        n = len(a.slots)
        await stream(ws, 500, {**msg, "slot": 0, "delivery": "whole"})
        early = await c.play_event(a.assignment_id, 0, 1000)  # the rest not sent yet
        for i in range(1, n):
            t_sent = time.monotonic()  # the server sends the last of it after this
            await stream(ws, 500 + i, {**msg, "slot": i, "delivery": "whole"})
        evs = [await c.play_event(a.assignment_id, i, 3000) for i in range(n)]
        wall_ms = (time.monotonic() - t_sent) * 1000
        await c.aclose()
        return n, early, evs, wall_ms

    n, early, evs, wall_ms = asyncio.run(go())
    assert early["type"] == "listen_error" and "all of its audio" in early["message"]
    got = [e["played_ms"] for e in evs]
    assert all(e["type"] == "play_saved" for e in evs)
    # each slot asked for 3 s; all of them together had only the wall time (+ the 400 ms slack)
    assert sum(got) <= wall_ms + 400 + 1e-6 < 3000 * n


def test_a_failing_stimulus_gets_a_generic_error(live, folder):
    """The store's reason names the take; the page is told only that the clip failed."""
    tid = wire_test(live, folder, "mos", [], items_per_rater=1)
    store = live.state.store

    async def go():
        c, a, ws, msg = await first_screen(live, tid)
        row = store.db["takes"].get(a.take_id)
        (store.root / row["audio_path"]).unlink()  # a damaged store
        rec = await stream(ws, 600, {**msg, "slot": 0})
        await c.aclose()
        return a, rec

    a, rec = asyncio.run(go())
    assert rec["json"] == [
        {
            "type": "error",
            "token": 600,
            "message": "this clip could not be played; please try again",
        }
    ]
    assert a.take_id not in json.dumps(rec["json"])
