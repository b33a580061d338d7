"""Raters benchmark: 50 simulated raters complete a 20-item MOS test against ``listenlab serve``.

Everything goes over the real HTTP and WebSocket routes of a server running in a subprocess
(``tests.support.rater.RaterClient``: join, consent, stream each stimulus over ``/ll/ws`` and
wait as long as it plays, report the play event, vote). Mid-session the server is killed with
SIGKILL and restarted on the same DB and port; raters retry with the same answer id (a vote
is idempotent on it) and resume from the server's status.

Reports: votes acknowledged vs stored (must be equal: nothing lost, nothing duplicated), vote
latency p50/p99, and the resume success rate (raters who finished all items after the kill).
Writes ``benchmarks/results/raters.json``.

    .venv/bin/python benchmarks/raters.py [--raters 50] [--kill-after 25]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.rater import RaterClient  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BACKENDS = ("joe=piper?deterministic=1", "qwen-wire=piper?deterministic=1&profile=qwen3-tts")


def start_server(db: Path, port: int, backends: tuple[str, ...] = BACKENDS) -> subprocess.Popen:
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"}
    env.pop("LISTENLAB_ADMIN_PASSWORD", None)  # localhost admin creates the test
    flags = [x for b in backends for x in ("--backend", b)]
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--db", str(db), *flags],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_up(url: str, timeout: float = 120) -> None:
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        try:
            if httpx.get(url + "/ll/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError("server did not come up")


async def create_test(url: str, spec: dict, timeout: float = 900) -> str:
    """POST a listening test to a localhost server (admin by origin) and return its id."""
    async with httpx.AsyncClient(timeout=timeout) as h:
        r = await h.post(url + "/ll/admin/tests", json=spec)
        r.raise_for_status()
        return r.json()["test_id"]


class Sim:
    """One rater: keeps the answer id of its pending item until the server acknowledges it."""

    def __init__(self, url: str, test_id: str, n: int):
        self.c = RaterClient(url, test_id, crowd_id=f"sim-{n}")
        self.acked: set[str] = set()
        self.pending: dict[str, str] = {}
        self.errors = 0
        self.resumed = False
        self.finished = False

    async def reconnect(self) -> None:
        if self.c.ws is not None:
            with contextlib.suppress(Exception):
                await self.c.ws.close()
        self.c.ws = None

    async def run(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                if self.c.token is None:
                    await self.c.join()
                for aid, ans in list(self.pending.items()):  # re-send unacknowledged votes
                    r = await self.c.vote({"answer_id": ans, "assignment_id": aid, "score": 4})
                    if r.status_code == 200:
                        self.acked.add(aid)
                        self.pending.pop(aid)
                    elif r.status_code == 409 and "listen first" in r.text:
                        self.pending.pop(aid)  # never stored: it is the current item again
                    else:
                        raise RuntimeError(f"re-send: {r.status_code} {r.text[:100]}")
                st = await self.c.status()
                while not st["finished"]:
                    it = st["item"]
                    aid = it["assignment_id"]
                    await self.c.listen(aid, 0)
                    ans = self.pending.setdefault(aid, uuid.uuid4().hex)
                    r = await self.c.vote({"answer_id": ans, "assignment_id": aid, "score": 4})
                    if r.status_code != 200:
                        raise RuntimeError(f"vote: {r.status_code} {r.text[:100]}")
                    self.acked.add(aid)
                    self.pending.pop(aid, None)
                    st = await self.c.status()
                self.finished = True
                return
            except Exception:
                self.errors += 1
                self.resumed = True
                await self.reconnect()
                await asyncio.sleep(0.5)


def stored_counts(db: Path, test_id: str) -> dict[str, int]:
    """What the store kept of the test: answers, MOS rows, raters' duplicate ratings of one
    take, assignments (read through the store, read-only)."""
    from app.store import Store
    from app.store.listening import TestStore

    with Store.open(db, read_only=True) as store:
        tests = TestStore(store)
        mos = store.mos_frame(test_id)
        per_take = mos.groupby(["rater_id", "take_id"]).size() if not mos.empty else mos
        return {
            "answers": len(tests.answers_frame(test_id)),
            "mos_rows": len(mos),
            "duplicates": int((per_take > 1).sum()) if not mos.empty else 0,
            "assignments": len(tests.export_frame("assignments", test_id)),
        }


async def main_async(args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="ll-raters-"))
    db = tmp / "listenlab.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(db, port)
    try:
        wait_up(url)
        t = time.monotonic()
        test_id = await create_test(
            url,
            {
                "name": "raters benchmark",
                "kind": "mos",
                "systems": [
                    {"name": "joe", "backend": "joe"},
                    {"name": "qwen-wire", "backend": "qwen-wire"},
                ],
                "prompts": {"source": "harvard", "n": 10},
                "items_per_rater": 20,
                "screening": False,
                "headphone_check": False,
            },
        )
        gen_s = time.monotonic() - t
        sims = [Sim(url, test_id, i) for i in range(args.raters)]
        deadline = time.monotonic() + args.timeout
        tasks = [asyncio.create_task(s.run(deadline)) for s in sims]
        await asyncio.sleep(args.kill_after)
        acked_before = sum(len(s.acked) for s in sims)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        t_kill = time.monotonic()
        proc = start_server(db, port)
        await asyncio.to_thread(wait_up, url)
        restart_s = time.monotonic() - t_kill
        await asyncio.gather(*tasks)
        lat = np.array([x for s in sims for x in s.c.latencies_ms])
        for s in sims:
            await s.c.aclose()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    counts = stored_counts(db, test_id)
    acked = sum(len(s.acked) for s in sims)
    interrupted = [s for s in sims if s.resumed]
    return {
        "raters": args.raters,
        "items_per_rater": counts["assignments"] // max(1, args.raters),
        "stimulus_generation_s": round(gen_s, 1),
        "kill_after_s": args.kill_after,
        "acked_before_kill": acked_before,
        "restart_s": round(restart_s, 1),
        "votes_acknowledged": acked,
        "votes_stored": counts["answers"],
        "mos_rows": counts["mos_rows"],
        "duplicates": counts["duplicates"],
        "lost_or_extra": counts["answers"] - acked,
        "vote_latency_ms": {
            "n": int(len(lat)),
            "p50": round(float(np.percentile(lat, 50)), 1) if len(lat) else None,
            "p99": round(float(np.percentile(lat, 99)), 1) if len(lat) else None,
        },
        "interrupted_raters": len(interrupted),
        "resumed_and_finished": sum(s.finished for s in interrupted),
        "resume_success_rate": (
            round(sum(s.finished for s in interrupted) / len(interrupted), 3)
            if interrupted
            else None
        ),
        "finished": sum(s.finished for s in sims),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared with other work)",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--raters", type=int, default=50)
    ap.add_argument("--kill-after", type=float, default=25.0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "raters.json"))
    args = ap.parse_args()
    res = asyncio.run(main_async(args))
    print(json.dumps(res, indent=1))
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    ok = res["lost_or_extra"] == 0 and res["duplicates"] == 0
    print("PASS: nothing lost, nothing duplicated" if ok else "FAIL: votes lost or duplicated")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
