"""Take the manual's screenshots again: ``.venv/bin/python docs/screenshots.py [--out docs/img]``.

Why a script: the pages change, and a screenshot nobody can retake goes stale. It starts the
real ``listenlab serve`` (two systems: the CPU voice and the same voice on Qwen3-TTS's wire
profile) on a free port with a temporary DB and a random admin password, drives Debian's
Chromium (``/usr/bin/chromium``, never ``playwright install``) through each page a newcomer
uses, and writes small PNGs (1000 px wide, at most 1500 px tall, 256 colours):

playground.png, designer.png, rater.png, rater-phone.png, results.png, results-13.png,
arena.png, probe.png

Scripted raters (``tests.support.rater.RaterClient``, the real HTTP/WebSocket routes, each
clip waited for in real time) give the results page something to show. Takes 2-4 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.browser_latency import screenshot as playground_screenshot  # noqa: E402
from tests.support.app_util import chromium, open_playground, speak, wait_finished  # noqa: E402
from tests.support.rater import RaterClient  # noqa: E402
from tests.support.remote_util import free_port  # noqa: E402

SYSTEMS = ["joe=piper", "qwen=piper?profile=qwen3-tts"]
WIDTH, MAX_HEIGHT = 1000, 1500
RATERS = 4


@dataclass
class Server:
    url: str
    password: str
    db: Path


@contextlib.contextmanager
def serve(tmp: Path) -> Iterator[Server]:
    """``listenlab serve`` in a child process, as a user starts it, until the block exits."""
    port, password = free_port(), secrets.token_urlsafe(12)
    env = {**os.environ, "LISTENLAB_ADMIN_PASSWORD": password, "GRADIO_ANALYTICS_ENABLED": "0"}
    db = tmp / "listenlab.db"
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--db", str(db)]
    for s in SYSTEMS:
        cmd += ["--backend", s]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "ll/health", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("listenlab serve did not start")
            time.sleep(0.5)
        yield Server(url, password, db)
    finally:
        proc.terminate()
        proc.wait(30)


def optimise(path: Path, max_height: int = MAX_HEIGHT) -> None:
    """At most WIDTH x max_height, 256 colours, optimised: screenshots stay ~15-120 kB."""
    from PIL import Image

    img = Image.open(path).convert("RGB")
    if img.width > WIDTH:
        img = img.resize((WIDTH, round(img.height * WIDTH / img.width)), Image.LANCZOS)
    img = img.crop((0, 0, img.width, min(img.height, max_height)))
    img.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def shot(page, path: Path, max_height: int = MAX_HEIGHT) -> None:
    page.wait_for_timeout(500)  # let Gradio finish laying out
    page.screenshot(path=str(path), full_page=True)
    optimise(path, max_height)
    print(f"wrote {path} ({path.stat().st_size // 1024} kB)")


def create_test(srv: Server) -> str:
    """A small MOS test of both systems, made through the designer's JSON route."""
    body = {
        "name": "CPU voice: own wire vs Qwen3-TTS wire",
        "kind": "mos",
        "systems": [{"name": "joe", "backend": "joe"}, {"name": "qwen", "backend": "qwen"}],
        "prompts": {"source": "harvard", "n": 4},
        "items_per_rater": 4,
        "screening": False,
        "headphone_check": False,
        "familiarise": False,
        "completion_code": "C1A2B3",
    }
    r = httpx.post(
        srv.url + "ll/admin/tests",
        json=body,
        headers={"Authorization": f"Bearer {srv.password}"},
        timeout=600,
    )
    r.raise_for_status()
    return r.json()["test_id"]


async def rate(srv: Server, test_id: str) -> None:
    """RATERS scripted raters finish the test (each clip streamed and waited for)."""

    async def one(n: int) -> None:
        rng = random.Random(n)
        c = RaterClient(srv.url, test_id, crowd_id=f"demo-{n}")
        try:
            await c.join()
            st = await c.status()
            while not st["finished"]:
                aid = st["item"]["assignment_id"]
                await c.listen(aid, 0)
                r = await c.vote({"assignment_id": aid, "score": rng.choice([3, 4, 4, 5])})
                r.raise_for_status()
                st = await c.status()
        finally:
            await c.aclose()

    await asyncio.gather(*(one(n) for n in range(RATERS)))


def results_13(page, srv: Server, tmp: Path, path: Path) -> None:
    """The Results tab of a 13-system MOS test (the CPU voice damaged 13 ways, one system
    renamed ``<img src=x onerror=…>`` in the store): its forest plot and pairwise matrix."""
    import sqlite3

    from backends.piper import PiperBackend, PiperOptions
    from tests.support.results_study import run_study, stimuli_folder

    voice = PiperBackend(options=PiperOptions(deterministic=True))
    voice.warm_up()
    headers = {"Authorization": f"Bearer {srv.password}"}
    from app.store import Store

    with Store.open(srv.db, read_only=True) as store, ThreadPoolExecutor(1) as pool:
        # off playwright's thread (its loop is running there): the clips, then the raters
        folder = pool.submit(stimuli_folder, tmp / "thirteen", voice).result()
        pool.submit(run_study, srv.url, store, folder, RATERS, headers).result()
    with sqlite3.connect(srv.db) as c:  # a name from a copied or older store
        for table in ("takes", "stimuli"):
            c.execute(
                f"UPDATE {table} SET system_id = ? WHERE system_id = 's07'",
                ('<img src=x onerror="window.__pwned=1">',),
            )
    page.reload()
    page.get_by_role("tab", name="Results").click()
    page.wait_for_function(
        "document.querySelector('#lt-results-pick input')?.value?.includes('thirteen')",
        timeout=30_000,
    )
    page.click("#lt-results-show")
    page.wait_for_selector("#lt-matrix-table", timeout=120_000)
    page.wait_for_timeout(1500)
    top = page.locator("#lt-forest").bounding_box()
    bottom = page.locator(".ll-matrix").bounding_box()
    clip = {
        "x": 0,
        "y": top["y"],
        "width": WIDTH,
        "height": bottom["y"] + bottom["height"] - top["y"],
    }
    page.screenshot(path=str(path), full_page=True, clip=clip)
    optimise(path)
    print(f"wrote {path} ({path.stat().st_size // 1024} kB)")


def probe_report(tmp: Path) -> Path:
    out = tmp / "probe-out"
    cmd = [sys.executable, "-m", "app.cli", "probe", "--backend", "piper"]
    r = subprocess.run([*cmd, "--concurrency", "1,2", "-o", str(out)], cwd=tmp)
    if r.returncode not in (0, 1):  # 1 = the backend failed a check: still a report to show
        raise RuntimeError(f"listenlab probe exited {r.returncode}")
    return out / "probe.html"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"), help="folder for the PNGs")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ll-shots-"))
    with serve(tmp) as srv, chromium(viewport={"width": WIDTH, "height": 900}) as ctx:
        # The Playground: one warm-up take (the start rule learns this voice, as it has for a
        # returning visitor), then a paragraph streamed with one glitch mark (as the benchmark)
        warm = open_playground(ctx, srv.url)
        speak(warm, "Hello there.", "joe")
        wait_finished(warm, timeout_ms=120_000)
        warm.close()
        playground_screenshot(ctx, srv, "joe", out / "playground.png")
        optimise(out / "playground.png")

        # The designer, logged in as the admin (the address without its slash, as documented)
        ctx.request.post(srv.url + "ll/admin/login", form={"password": srv.password})
        page = ctx.new_page()
        page.goto(srv.url + "admin/tests")
        page.get_by_text("Generate the stimuli").first.wait_for(timeout=60_000)
        shot(page, out / "designer.png", max_height=1000)  # name, type, systems, prompts

        test_id = create_test(srv)
        with ThreadPoolExecutor(1) as pool:  # playwright's sync API holds this thread's loop
            pool.submit(asyncio.run, rate(srv, test_id)).result()

        # The rater page: consent, then the first item
        rater = ctx.new_page()
        rater.goto(f"{srv.url}listen/{test_id}?PROLIFIC_PID=demo-rater")
        rater.click("#lt-agree")
        rater.wait_for_selector("#lt-item:not([hidden])", timeout=60_000)
        shot(rater, out / "rater.png")
        rater.set_viewport_size({"width": 390, "height": 844})  # the same item on a phone
        shot(rater, out / "rater-phone.png")

        # The results tab of the same admin page
        page.reload()
        page.get_by_role("tab", name="Results").click()
        page.wait_for_function(
            "document.querySelector('#lt-results-pick input')?.value?.length > 0",
            timeout=30_000,
        )
        page.click("#lt-results-show")
        page.wait_for_function(
            "document.querySelector('#lt-results-summary').textContent.length > 20",
            timeout=60_000,
        )
        page.wait_for_timeout(1500)  # the plot draws after the tables
        shot(page, out / "results.png")
        results_13(page, srv, tmp, out / "results-13.png")

        # The arena: one battle, voted, names revealed
        arena = ctx.new_page()
        arena.goto(srv.url + "arena")
        arena.wait_for_selector("#ll-arena[data-ready='1']", timeout=60_000)
        arena.click("#ar-random")
        arena.wait_for_function("document.querySelector('#ar-text').value.length > 10")
        arena.click("#ar-start")
        arena.wait_for_function("window.listenlab.arena.ready", timeout=120_000)
        arena.click("#ar-vote-a")
        arena.wait_for_function(
            "!document.querySelector('#ar-name-a').textContent.includes('hidden')",
            timeout=30_000,
        )
        arena.wait_for_function(
            "/\\b1 vote/.test(document.querySelector('#arena-summary').textContent)"
            " && !document.querySelector('.progress-text')",
            timeout=60_000,
        )
        shot(arena, out / "arena.png")

        # The probe's HTML report (a file, not a server page)
        report = ctx.new_page()
        report.goto(probe_report(tmp).as_uri())
        shot(report, out / "probe.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
