"""A scripted rater over the real HTTP and WebSocket routes (no browser, no in-process calls).

Why: the raters benchmark drives 50 of these against ``listenlab serve``, and the tests use one
to check the server's rules (listen-gating, one vote per item, tokens) without a browser. It
does what the page does: join, consent, headphone check, stream each stimulus over ``/ll/ws``,
wait as long as the audio lasts (a player plays in real time), report the play event, vote.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import connect


@dataclass
class Played:
    take_id: str | None
    frames: int
    sample_rate: int
    chunks: int
    played_ms: float
    done: dict[str, Any] | None
    arrivals_ms: list[float] = field(default_factory=list)


class RaterClient:
    def __init__(self, base: str, test_id: str, crowd_id: str | None = None, timeout: float = 60):
        self.base = base.rstrip("/")
        self.test_id = test_id
        self.crowd_id = crowd_id
        self.token: str | None = None
        self.http = httpx.AsyncClient(base_url=self.base, timeout=timeout)
        self.ws = None
        self._gen = 0
        self.latencies_ms: list[float] = []

    async def aclose(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        await self.http.aclose()

    def _h(self) -> dict[str, str]:
        return {"X-Rater-Token": self.token} if self.token else {}

    async def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return await self.http.post(
            f"/ll/listen/{self.test_id}/{path}", json=body or {}, headers=self._h()
        )

    async def join(self) -> dict[str, Any]:
        r = await self.post("join", {"crowd_id": self.crowd_id, "source": "PROLIFIC_PID"})
        r.raise_for_status()
        self.token = r.json()["token"]
        (await self.post("consent")).raise_for_status()
        return r.json()

    async def status(self) -> dict[str, Any]:
        r = await self.http.get(f"/ll/listen/{self.test_id}/status", headers=self._h())
        r.raise_for_status()
        return r.json()

    async def headphone(self, correct: bool = True) -> dict[str, Any]:
        """The headphone screen as the page does it: fetch each trial's audio, let it play,
        pick. The picks come from the audio (:func:`screening.ideal_listener`: a listener on
        headphones), or with ``correct=False`` from one on loudspeakers (every Huggins trial
        missed on purpose): the answer key never reaches a client."""
        from evaluation.listening import screening

        st = await self.status()
        kinds = st["screen"]["kinds"]
        picks, until = [], 0.0
        for n, kind in enumerate(kinds):
            r = await self.http.get(f"/ll/listen/{self.test_id}/screen/{n}", headers=self._h())
            r.raise_for_status()
            audio, rate = screening.read_wav(r.content)
            until = max(until, time.monotonic() + len(audio) / rate)
            heard = screening.ideal_listener(kind, audio, rate, headphones=correct)
            picks.append(heard if correct or kind == "antiphase" else (heard + 1) % 3)
        await asyncio.sleep(max(0.0, until - time.monotonic()) + 0.05)
        r = await self.post("headphone", {"answers": picks})
        r.raise_for_status()
        return r.json()

    async def _socket(self):
        if self.ws is None:
            u = self.base.replace("http://", "ws://").replace("https://", "wss://") + "/ll/ws"
            self.ws = await connect(u, max_size=2**24)
        return self.ws

    async def listen(
        self, assignment_id: str, slot: int = 0, *, realtime: bool = True, report: bool = True
    ) -> Played:
        """Stream one stimulus, wait as long as it plays, report the play event."""
        ws = await self._socket()
        self._gen += 1
        tok = self._gen
        await ws.send(
            json.dumps(
                {
                    "type": "stimulus",
                    "token": tok,
                    "test_id": self.test_id,
                    "rater_token": self.token,
                    "assignment_id": assignment_id,
                    "slot": slot,
                }
            )
        )
        t0 = time.monotonic()
        frames, sr, ch, chunks, take, done = 0, 0, 1, 0, None, None
        arrivals = []
        while True:
            m = await ws.recv()
            if isinstance(m, bytes):
                if int.from_bytes(m[:4], "little") == tok and sr:
                    frames += (len(m) - 12) // 2 // ch
                    chunks += 1
                    arrivals.append((time.monotonic() - t0) * 1000)
                continue
            d = json.loads(m)
            if d.get("token") != tok:
                continue
            if d["type"] == "start":
                sr, ch, take = d["sample_rate"], d["channels"], d.get("stream_id")
            elif d["type"] == "done":
                done = d
                break
            elif d["type"] in {"error", "cancelled"}:
                raise RuntimeError(f"stimulus failed: {d}")
        played = frames / sr * 1000.0 if sr else 0.0
        if realtime:  # a player needs the clip's duration to play it
            first = arrivals[0] / 1000 if arrivals else 0.0
            rest = t0 + first + played / 1000.0 - time.monotonic()
            if rest > 0:
                await asyncio.sleep(rest)
        if report:
            await self.play_event(assignment_id, slot, played)
        return Played(take, frames, sr, chunks, played, done, arrivals)

    async def _ask(self, kind: str, replies: set[str], **fields: Any) -> dict:
        """Send one rater message about this test and return the first reply of ``replies``."""
        ws = await self._socket()
        msg = {"type": kind, "test_id": self.test_id, "rater_token": self.token, **fields}
        await ws.send(json.dumps(msg))
        while True:
            m = await ws.recv()
            if isinstance(m, bytes):
                continue
            d = json.loads(m)
            if d.get("type") in replies:
                return d

    async def play_event(self, assignment_id: str, slot: int, played_ms: float) -> dict:
        return await self._ask(
            "play_event",
            {"play_saved", "listen_error"},
            assignment_id=assignment_id,
            slot=slot,
            played_ms=played_ms,
        )

    async def glitch(self, assignment_id: str, slot: int, position_ms: float) -> dict:
        """A "G" mark at ``position_ms`` of the stimulus this client last streamed."""
        return await self._ask(
            "listen_glitch",
            {"listen_glitch_saved", "listen_error"},
            assignment_id=assignment_id,
            slot=slot,
            position_ms=position_ms,
            report_id=uuid.uuid4().hex,
        )

    async def vote(self, body: dict[str, Any]) -> httpx.Response:
        body = {"answer_id": uuid.uuid4().hex, **body}
        t = time.perf_counter()
        r = await self.post("vote", body)
        self.latencies_ms.append((time.perf_counter() - t) * 1000.0)
        return r


__all__ = ["Played", "RaterClient"]
