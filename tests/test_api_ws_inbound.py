"""``listenlab api``'s WebSocket holds a bounded amount of unread client messages.

While a generation runs, the session reads client messages into a queue (so a disconnect is
noticed at once). A client that floods it must be cut off with a clear error, not buffered
without bound; an honest client that sends its next utterance during a generation is served.
Real parts: ``listenlab api`` over the real Piper voice, paced at 0.67x real time by the
Qwen3-TTS wire profile so the generation is still running while the client sends.
"""

from __future__ import annotations

import json

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from app.api.limits import ApiLimits
from tests.support.remote_util import serve_api

pytestmark = pytest.mark.timeout(120)

SPEC = "piper?deterministic=1&profile=qwen3-tts&pace=0.67"
TEXT = "The birch canoe slid on the smooth planks. Glue the sheet to the dark blue background."
BUDGET = 300_000


def ws_url(url: str) -> str:
    return url.replace("http", "ws") + "/v1/audio/speech/stream"


def drain(ws) -> tuple[list[dict], int, int | None]:
    """Every JSON message until the socket closes or an utterance's session.done, the audio
    bytes received, and the close code (None: still open)."""
    texts, audio = [], 0
    try:
        while True:
            m = ws.recv(timeout=60)
            if isinstance(m, bytes):
                audio += len(m)
                continue
            texts.append(json.loads(m))
            if texts[-1]["type"] == "session.done":
                return texts, audio, None
    except ConnectionClosed as e:
        return texts, audio, e.rcvd.code if e.rcvd else None


def test_a_flood_during_a_generation_is_cut_off_with_a_clear_error():
    limits = ApiLimits(ws_inbound_bytes=BUDGET)
    with serve_api(SPEC, limits=limits) as url, connect(ws_url(url), max_size=None) as ws:
        ws.send(
            json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True})
        )
        ws.send(json.dumps({"type": "input.text", "text": TEXT}))
        ws.send(json.dumps({"type": "input.done"}))
        filler = json.dumps({"type": "input.text", "text": "x" * 100_000})
        try:
            for _ in range(6):  # 600 kB of messages while the paced generation runs
                ws.send(filler)
        except ConnectionClosed:
            pass  # cut off before the last one was sent (the server read faster): still checked
        texts, _, code = drain(ws)
        errors = [t for t in texts if t["type"] == "error"]
        assert errors, texts
        assert "too many messages waiting" in errors[-1]["message"]
        assert f"more than {BUDGET} bytes" in errors[-1]["message"]
        assert code == 1008
        # the cut-off ended the generation: no audio.done claims it finished
        assert not any(t["type"] == "audio.done" for t in texts)


def test_an_honest_client_sending_during_a_generation_is_served():
    limits = ApiLimits(ws_inbound_bytes=BUDGET)
    with serve_api(SPEC, limits=limits) as url, connect(ws_url(url), max_size=None) as ws:
        ws.send(
            json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True})
        )
        for text in (TEXT, "A second utterance, sent while the first still plays."):
            ws.send(json.dumps({"type": "input.text", "text": text}))
            ws.send(json.dumps({"type": "input.done"}))
        first, audio1, code1 = drain(ws)
        second, audio2, code2 = drain(ws)
        assert code1 is None and code2 is None
        for i, got in enumerate((first, second)):
            assert [t["type"] for t in got] == ["audio.start", "audio.done", "session.done"]
            assert got[1]["error"] is False and got[2]["utterance_index"] == i
        # both utterances arrived in full (pcm s16le at 24 kHz: > 2 s and > 1.5 s of speech)
        assert audio1 > 2 * 24000 * 2 and audio2 > 1.5 * 24000 * 2
