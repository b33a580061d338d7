"""Saved voices stay private on a backend with a server-side voice store.

A remote vLLM-Omni server keeps every uploaded voice in one list (``GET /v1/audio/voices``),
so a Playground visitor used to see every other visitor's saved voice, name and transcript, in
``/ll/api/config`` and the voice menu, and could speak with it by name. Real servers on
127.0.0.1: listenlab with an admin password (so no local client is the admin), and the
vLLM-Omni-shaped fault server of ``tests/support`` as the remote voice store (vLLM-Omni's own
server needs a GPU engine; ``tests/conformance`` checks the wire against it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
import websockets

from app.server import create_app
from tests.support.app_util import live_server, tmp_db

ASSETS = Path(__file__).resolve().parents[1] / "assets"
PW = "voices-admin-pw"
TRANSCRIPT = "Alice reads her own private sentence."


@pytest.fixture(scope="module")
def setup():
    from tests.support.fault_server import create_fault_app
    from tests.support.remote_util import serve_app

    mp = pytest.MonkeyPatch()
    mp.setenv("LISTENLAB_ADMIN_PASSWORD", PW)
    with serve_app(create_fault_app()) as fault_url:
        app = create_app(
            {
                "piper": "piper?deterministic=1",
                "clone": f"vllm-omni+http://{fault_url[7:]}/ok?mode=sse&cloning=1",
            },
            tmp_db(),
        )
        with live_server(app) as live:
            yield live, fault_url
    mp.undo()


async def speak(url: str, cookie: str, voice: str) -> dict:
    ws_url = url.replace("http://", "ws://") + "ll/ws"
    async with websockets.connect(ws_url, additional_headers={"Cookie": cookie}) as ws:
        await ws.send(
            json.dumps(
                {"type": "speak", "token": 1, "text": "Hello.", "backend": "clone", "voice": voice}
            )
        )
        while True:
            m = await asyncio.wait_for(ws.recv(), 120)
            if isinstance(m, str) and json.loads(m)["type"] in {"done", "error"}:
                return json.loads(m)


def clone_voices(cfg: dict) -> list[dict]:
    return next(b for b in cfg["backends"] if b["label"] == "clone")["voices"]


def test_a_visitor_never_sees_or_uses_another_visitors_server_side_voice(setup):
    live, fault_url = setup
    alice, bob = httpx.Client(base_url=live.url), httpx.Client(base_url=live.url)
    alice.get("ll/health"), bob.get("ll/health")  # each gets its own ll_owner cookie
    wav = (ASSETS / "reference_joe.wav").read_bytes()
    r = alice.post(
        "ll/api/voices",
        files={"file": ("alice.wav", wav, "audio/wav")},
        data={"name": "Alice", "ref_text": TRANSCRIPT, "consent": "yes"},
    )
    assert r.status_code == 200, r.text
    vid = r.json()["voice"]["voice_id"]
    cookie_a = f"ll_owner={alice.cookies['ll_owner']}"
    cookie_b = f"ll_owner={bob.cookies['ll_owner']}"
    done = asyncio.run(speak(live.url, cookie_a, "lib:" + vid))  # synced to the server's store
    assert done["type"] == "done", done
    remote = live.state.library.get(vid).synced["clone"]
    on_server = httpx.get(fault_url + "/ok/v1/audio/voices").json()["uploaded_voices"]
    assert [u["ref_text"] for u in on_server if u["name"] == remote] == [TRANSCRIPT]
    # Alice sees her voice on the backend; Bob sees neither it nor its transcript
    assert remote in [v["name"] for v in clone_voices(alice.get("ll/api/config").json())]
    bob_cfg = bob.get("ll/api/config")
    assert remote not in bob_cfg.text and TRANSCRIPT not in bob_cfg.text
    assert bob.get("ll/api/voices").json()["voices"] == []
    # naming it is no way in: refused as unknown, nothing generated for Bob
    takes_before = len(live.state.store.take_ids())
    refused = asyncio.run(speak(live.url, cookie_b, remote))
    assert refused["type"] == "error" and refused["message"] == f"unknown voice {remote!r}"
    assert len(live.state.store.take_ids()) == takes_before
    # the admin sees every voice of the store (to manage it)
    admin = httpx.get(live.url + "ll/api/config", headers={"Authorization": f"Bearer {PW}"})
    assert remote in [v["name"] for v in clone_voices(admin.json())]
