"""Helpers for the app tests: a real uvicorn server in a thread, and headless Debian Chromium."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import uvicorn

from tests.support.remote_util import bound_socket, free_port  # noqa: F401 (free_port: re-exported)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class Live:
    url: str
    app: Any
    port: int

    @property
    def state(self):
        return self.app.state.listenlab


@contextlib.contextmanager
def live_server(app, tls: tuple[Path, Path] | None = None) -> Iterator[Live]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port in a thread, until the block exits;
    ``tls`` (cert, key), e.g. from :func:`tests.support.upload_util.self_signed`: over HTTPS."""
    sock = bound_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        # proxy_headers=False as in ``listenlab serve``: app.web.proxies.Proxies decides whom to trust
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
            proxy_headers=False,
            **({"ssl_certfile": str(tls[0]), "ssl_keyfile": str(tls[1])} if tls else {}),
        )
    )
    th = threading.Thread(target=server.run, args=([sock],), daemon=True)
    th.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not th.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield Live(f"{'https' if tls else 'http'}://127.0.0.1:{port}/", app, port)
    finally:
        server.should_exit = True
        th.join(15)
        sock.close()


@contextlib.contextmanager
def chromium(extra_args: list[str] | None = None, **kw) -> Iterator[Any]:
    """A persistent context in a fresh user-data-dir (never ``playwright install``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="ll-chromium-") as d:
        ctx = p.chromium.launch_persistent_context(
            d,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS + (extra_args or []),
            **kw,
        )
        try:
            yield ctx
        finally:
            ctx.close()


def open_playground(ctx, url: str, timeout_ms: float = 30_000):
    page = ctx.new_page()
    page.goto(url)
    page.wait_for_selector("#ll-root[data-ready='1']", timeout=timeout_ms)
    return page


def tick(box, timeout_s: float = 30.0) -> None:
    """Tick a Gradio checkbox (a Playwright locator). Right after a page load Gradio can
    re-render the box and swallow the click (seen with both cores busy: "Clicking the checkbox
    did not change its state"), so the tick is tried again until the box stays ticked."""
    from playwright.sync_api import Error

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            box.check(timeout=5_000)
            box.page.wait_for_timeout(300)  # a late re-render would clear it again
            if box.is_checked():
                return
        except Error:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError("the checkbox does not stay ticked")


def speak(page, text: str, backend: str = "piper") -> None:
    """In the Playground: pick ``backend``, type ``text`` and press Speak."""
    page.select_option("#ll-backend", backend)
    page.fill("#ll-text", text)
    page.click("#ll-speak")


def wait_finished(page, timeout_ms: float = 60_000) -> dict[str, Any]:
    """Wait until the current generation finished playing; return its JSON-safe summary."""
    page.wait_for_function(
        "window.listenlab.last && window.listenlab.last.finished", timeout=timeout_ms
    )
    return page.evaluate(
        """() => { const g = window.listenlab.last;
        return {token: g.token, status: g.status, state: g.state, takeId: g.takeId, sr: g.sr,
          ch: g.ch, frames: g.framesRecv, chunks: g.chunks.length, underruns: g.underruns,
          firstScheduledMs: g.firstScheduledMs, firstSoundMs: g.firstSoundMs,
          firstAudibleMs: g.firstAudibleMs, prebufferMs: g.prebufferMs, error: g.error,
          summary: g.summary, chunkList: g.chunks.map(c => ({index: c.index, frames: c.frames,
            arrivalMs: c.arrivalMs, deadlineMs: c.deadlineMs, serverMs: c.serverMs})),
          ctxState: window.listenlab.ctx.state, ctxRate: window.listenlab.ctx.sampleRate}; }"""
    )


def page_pcm(page) -> np.ndarray:
    """The int16 samples the page received and scheduled for playback (interleaved)."""
    b64 = page.evaluate("window.listenlab.pcmBase64(window.listenlab.last)")
    return np.frombuffer(base64.b64decode(b64), dtype="<i2")


def tmp_db() -> Path:
    return Path(tempfile.mkdtemp(prefix="ll-app-")) / "listenlab.db"


class TrackingBackend:
    """Delegates to a real backend and records whether each stream was closed before its end.

    Not a fake: the audio is the inner backend's. It only lets a test see, on the server side,
    that Stop in the page really closed the backend stream.
    """

    def __new__(cls, inner):
        from backends.base import Backend

        class _Tracking(Backend):
            name = "tracking"

            def __init__(self):
                self.inner = inner
                self.events: list[tuple[str, int]] = []
                self.spec = f"tracking:{inner.describe()}"

            @classmethod
            def from_params(cls, params, target=None):  # pragma: no cover - never from a spec
                raise NotImplementedError

            @property
            def capabilities(self):
                return self.inner.capabilities

            @property
            def loads_model(self):
                return self.inner.loads_model

            def warm_up(self):
                self.inner.warm_up()

            async def voices(self):
                return await self.inner.voices()

            async def stream(self, request):
                n = 0
                finished = False
                s = self.inner.stream(request)
                try:
                    async for c in s:
                        n += 1
                        yield c
                    finished = True
                finally:
                    await s.aclose()
                    self.events.append(("finished" if finished else "closed", n))

        return _Tracking()


# The three systems the listening-test tests stream: the CPU voice, the same voice on Qwen3-TTS's
# wire profile, and one that stalls 6 s after its 10th chunk (a broken stream mid-item).
LISTENING_BACKENDS = {
    "piper": "piper?deterministic=1",
    "qwen": "piper?deterministic=1&profile=qwen3-tts",
    "stall": (
        "piper?deterministic=1&profile=custom&rate=22050&channels=1&first_frames=1"
        "&chunk_frames=1&frame_hz=4&pace=4&stall=10:6"
    ),
}
TWO_PROMPTS = ["The birch canoe slid on the smooth planks.", "Rice is often served in round bowls."]


def listening_app(admin_password: str | None = None):
    """The app on :data:`LISTENING_BACKENDS` and a fresh SQLite file; with ``admin_password``
    the admin routes need it, without one they are open to localhost. The environment is
    restored after the app has read it."""
    import os

    from app.server import create_app

    old = os.environ.get("LISTENLAB_ADMIN_PASSWORD")
    if admin_password is None:
        os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
    else:
        os.environ["LISTENLAB_ADMIN_PASSWORD"] = admin_password
    try:
        return create_app(dict(LISTENING_BACKENDS), tmp_db(), mount_ui=False)
    finally:
        if old is None:
            os.environ.pop("LISTENLAB_ADMIN_PASSWORD", None)
        else:
            os.environ["LISTENLAB_ADMIN_PASSWORD"] = old


def create_test(live: Live, headers: dict | None = None, **spec) -> str:
    """POST a listening test (two systems on :data:`TWO_PROMPTS`, MOS, two items per rater,
    overridden by ``spec``) and return its id."""
    import httpx

    body = {
        "name": "t",
        "kind": "mos",
        "systems": [{"name": "a", "backend": "piper"}, {"name": "b", "backend": "qwen"}],
        "prompts": list(TWO_PROMPTS),
        "items_per_rater": 2,
        "familiarise": False,  # the familiarisation page has its own tests
        **spec,
    }
    r = httpx.post(live.url + "ll/admin/tests", json=body, headers=headers or {}, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["test_id"]


def create_one_item_test(
    live: Live, system: dict, prompt: str, headers: dict | None = None, **spec
) -> str:
    """One system on one prompt, one item per rater, no headphone check (and no screening
    items unless asked)."""
    spec.setdefault("screening", False)
    return create_test(
        live,
        headers,
        systems=[system],
        prompts=[prompt],
        items_per_rater=1,
        headphone_check=False,
        **spec,
    )


def screen_in_page(page, live: Live, test_id: str, correct: bool = True) -> None:
    """Click through the rater page's headphone screen as a listener would: play each trial,
    wait for its end (the answer buttons unlock), pick. The picks are read from the server's
    store (the page is never sent the key): the right interval, or with ``correct=False`` the
    antiphase tone / a wrong interval, which a loudspeaker listener picks."""
    import json

    rid = page.evaluate("window.listenTest.status.rater_id")
    keys = live.state.store.db.execute(
        "SELECT key FROM screen_trials WHERE test_id=? AND rater_id=? ORDER BY n", [test_id, rid]
    ).fetchall()
    for n, (key,) in enumerate(keys):
        k = json.loads(key)
        pick = (
            k["answer"]
            if correct
            else (k["order"].index("antiphase") if k["order"] else (k["answer"] + 1) % 3)
        )
        page.wait_for_function(f"document.querySelector('#lt-root').dataset.screenTrial === '{n}'")
        page.click("#lt-hp-play")
        page.wait_for_selector(
            f".lt-hp-answer[data-answer='{pick}']:not([disabled])", timeout=30_000
        )
        page.click(f".lt-hp-answer[data-answer='{pick}']")


def upload_voice(
    page, path: Path, name: str, transcript: str = "The quick brown fox.", consent=True
):
    """Save a voice through the Playground's Voices panel; returns the panel's message."""
    page.set_input_files("#ll-clip", str(path))
    page.fill("#ll-vname", name)
    page.fill("#ll-vtext", transcript)
    if consent:
        page.check("#ll-consent")
    else:
        page.uncheck("#ll-consent")
    page.click("#ll-vsave")
    page.wait_for_function(
        "!document.querySelector('#ll-vmsg').className.includes('busy')", timeout=30_000
    )
    msg = page.inner_text("#ll-vmsg")
    if msg.startswith("Saved voice"):
        # the page says so first, then fetches the list again: wait for the new voice's row
        page.wait_for_function(
            "(n) => [...document.querySelectorAll('#ll-vlist .ll-vname')]"
            ".some((e) => e.textContent === n)",
            arg=name,
            timeout=30_000,
        )
    return msg


def play_all_and_wait(page, n):
    """Play each of the item's ``n`` slots until the page counts it as heard."""
    for i in range(n):
        page.click(f".lt-play[data-slot='{i}']")
        page.wait_for_function(
            f"(window.listenTest.played[window.listenTest.status.item.assignment_id + ':{i}'] || 0)"
            f" >= window.listenTest.status.item.need_ms[{i}]",
            timeout=60_000,
        )


async def speak_ws(port: int, text: str) -> dict:
    """Speak ``text`` over a server's ``/ll/ws`` as the page does; the final ``done`` or
    ``error`` message, with the number of PCM frames received as ``frames``."""
    import json
    import struct

    import websockets

    frames = 0
    async with websockets.connect(f"ws://127.0.0.1:{port}/ll/ws", proxy=None) as ws:
        await ws.send(json.dumps({"type": "speak", "token": 5, "text": text}))
        while True:
            m = await asyncio.wait_for(ws.recv(), 120)
            if isinstance(m, bytes):
                token, _idx, _ms = struct.unpack("<IIf", m[:12])
                assert token == 5 and len(m) > 12
                frames += 1
                continue
            d = json.loads(m)
            if d["type"] in {"done", "error"}:
                d["frames"] = frames
                return d
