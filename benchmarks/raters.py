"""Raters benchmark: simulated raters complete a 20-item MOS test against ``listenlab serve``,
on SQLite (one process) or PostgreSQL (one or more replicas), with one replica SIGKILLed.

Everything goes over the real HTTP and WebSocket routes of servers running in subprocesses
(``tests.support.rater.RaterClient``: join, consent, stream each stimulus over ``/ll/ws`` and
wait as long as it plays, report the play event, vote). Raters are spread over the replicas.
Mid-session replica 0 is killed with SIGKILL and restarted on the same DB and port; its raters
retry with the same answer id (a vote is idempotent on it): with one replica they wait for the
restart, with several they move to the next replica at once and resume there (their crowd id
finds the same rater).

Reports: votes acknowledged vs stored (must be equal: nothing lost, nothing duplicated), vote
latency p50/p99, votes per second at saturation (stored votes over the span from the first
to the last vote), and the resume success rate (raters who finished all items after the
kill). Writes ``benchmarks/results/raters.json`` (one entry per configuration, kept across runs).

    .venv/bin/python benchmarks/raters.py [--engine sqlite|postgresql] [--replicas 1]
        [--raters 50] [--kill-after 25]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
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
from tests.support.replicas import BACKENDS, Replica, free_port  # noqa: E402


def start_server(db: Path | str, port: int, backends: tuple[str, ...] = BACKENDS):
    """One ``listenlab serve`` on ``db`` (what ``benchmarks/listening_validity.py`` uses)."""
    rep = Replica(str(db), port, Path(tempfile.mkdtemp(prefix="ll-replica-")), backends)
    return rep.start().proc


def wait_up(url: str, timeout: float = 120) -> None:
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/ll/health", timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError("server did not come up")


async def create_test(url: str, spec: dict, timeout: float = 900) -> str:
    """POST a listening test to a localhost server (admin by origin) and return its id."""
    async with httpx.AsyncClient(timeout=timeout) as h:
        r = await h.post(url + "/ll/admin/tests", json=spec)
        r.raise_for_status()
        return r.json()["test_id"]


class Sim:
    """One rater: keeps the answer id of its pending item until a server acknowledges it, and
    moves to the next replica when its own stops answering."""

    def __init__(self, urls: list[str], test_id: str, n: int):
        self.urls, self.n, self.test_id = urls, n, test_id
        self.at = n % len(urls)
        self.c = RaterClient(urls[self.at], test_id, crowd_id=f"sim-{n}")
        self.latencies_ms: list[float] = []
        self.acked: set[str] = set()
        self.pending: dict[str, str] = {}
        self.errors = 0
        self.resumed = False
        self.finished = False
        self.vote_times: list[float] = []

    async def reconnect(self) -> None:
        """A new client (on the next replica when there are several; the same crowd id)."""
        self.latencies_ms += self.c.latencies_ms
        with contextlib.suppress(Exception):
            await self.c.aclose()
        self.at = (self.at + 1) % len(self.urls)
        self.c = RaterClient(self.urls[self.at], self.test_id, crowd_id=f"sim-{self.n}")

    async def _resend(self) -> None:
        for aid, ans in list(self.pending.items()):  # re-send unacknowledged votes
            r = await self.c.vote({"answer_id": ans, "assignment_id": aid, "score": 4})
            if r.status_code == 200:
                self.acked.add(aid)
                self.pending.pop(aid)
            elif r.status_code == 409 and "listen first" in r.text:
                self.pending.pop(aid)  # never stored: it is the current item again
            else:
                raise RuntimeError(f"re-send: {r.status_code} {r.text[:100]}")

    async def run(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                if self.c.token is None:
                    await self.c.join()
                await self._resend()
                st = await self.c.status()
                while not st["finished"]:
                    aid = st["item"]["assignment_id"]
                    await self.c.listen(aid, 0)
                    ans = self.pending.setdefault(aid, uuid.uuid4().hex)
                    r = await self.c.vote({"answer_id": ans, "assignment_id": aid, "score": 4})
                    if r.status_code != 200:
                        raise RuntimeError(f"vote: {r.status_code} {r.text[:100]}")
                    self.vote_times.append(time.monotonic())
                    self.acked.add(aid)
                    self.pending.pop(aid, None)
                    st = await self.c.status()
                self.finished = True
                self.latencies_ms += self.c.latencies_ms
                return
            except Exception:
                self.errors += 1
                self.resumed = True
                await self.reconnect()
                await asyncio.sleep(0.5)


def stored_counts(db: str, test_id: str, local: Path) -> dict[str, int]:
    """What the store kept of the test: answers, MOS rows, raters' duplicate ratings of one
    take, assignments (read through the store, read-only)."""
    from app.store import open_store
    from app.store.listening import TestStore

    with open_store(db, read_only=True, local_dir=local) as store:
        tests = TestStore(store)
        mos = store.answer_frame("mos_ratings", test_id)
        per_take = mos.groupby(["rater_id", "take_id"]).size() if not mos.empty else mos
        return {
            "answers": len(tests.answers_frame(test_id)),
            "mos_rows": len(mos),
            "duplicates": int((per_take > 1).sum()) if not mos.empty else 0,
            "assignments": len(tests.export_frame("assignments", test_id)),
        }


TEST_SPEC = {
    "name": "raters benchmark",
    "kind": "mos",
    "systems": [{"name": "joe", "backend": "joe"}, {"name": "qwen-wire", "backend": "qwen-wire"}],
    "prompts": {"source": "harvard", "n": 10},
    "items_per_rater": 20,
    "screening": False,
    "headphone_check": False,
}


@contextlib.contextmanager
def database(engine: str, tmp: Path):
    """A SQLite file, or a database on a throwaway durable PostgreSQL cluster (fsync on)."""
    if engine == "sqlite":
        yield str(tmp / "listenlab.db")
        return
    from tests.support.postgres import start_cluster

    cluster = start_cluster(durable=True, max_connections=300)
    try:
        yield cluster.new_database("bench")
    finally:
        cluster.stop()


async def run_raters(reps: list[Replica], test_id: str, args) -> tuple[list[Sim], dict]:
    """Raters over every replica; replica 0 SIGKILLed after ``kill_after`` and restarted."""
    sims = [Sim([r.url for r in reps], test_id, i) for i in range(args.raters)]
    deadline = time.monotonic() + args.timeout
    tasks = [asyncio.create_task(s.run(deadline)) for s in sims]
    await asyncio.sleep(args.kill_after)
    acked_before = sum(len(s.acked) for s in sims)
    reps[0].kill()
    t_kill = time.monotonic()
    reps[0].start()
    await asyncio.to_thread(reps[0].wait_up)
    restart_s = time.monotonic() - t_kill
    await asyncio.gather(*tasks)
    for s in sims:
        await s.c.aclose()
    return sims, {"acked_before_kill": acked_before, "restart_s": round(restart_s, 1)}


async def main_async(args) -> dict:
    args.load_at_start = round(os.getloadavg()[0], 2)
    tmp = Path(tempfile.mkdtemp(prefix="ll-raters-"))
    with database(args.engine, tmp) as db:
        reps = [Replica(db, free_port(), tmp / f"replica{i}") for i in range(args.replicas)]
        try:
            for r in reps:
                r.start()
            for r in reps:
                await asyncio.to_thread(r.wait_up)
            t = time.monotonic()
            test_id = await create_test(reps[0].url, TEST_SPEC)
            gen_s = time.monotonic() - t
            sims, kill = await run_raters(reps, test_id, args)
        finally:
            for r in reps:
                r.kill()
        counts = stored_counts(db, test_id, tmp / "check")
    return summary(args, sims, counts, gen_s, kill)


def summary(args, sims: list[Sim], counts: dict, gen_s: float, kill: dict) -> dict:
    lat = np.array([x for s in sims for x in s.latencies_ms])
    times = sorted(t for s in sims for t in s.vote_times)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    acked = sum(len(s.acked) for s in sims)
    interrupted = [s for s in sims if s.resumed]
    return {
        "engine": args.engine,
        "replicas": args.replicas,
        "raters": args.raters,
        "items_per_rater": counts["assignments"] // max(1, args.raters),
        "stimulus_generation_s": round(gen_s, 1),
        "kill_after_s": args.kill_after,
        **kill,
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
        "votes_per_s": round(len(times) / span, 1) if span else None,
        "interrupted_raters": len(interrupted),
        "resumed_and_finished": sum(s.finished for s in interrupted),
        "resume_success_rate": (
            round(sum(s.finished for s in interrupted) / len(interrupted), 3)
            if interrupted
            else None
        ),
        "finished": sum(s.finished for s in sims),
        "load_avg_1m_at_start": args.load_at_start,
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--engine", choices=("sqlite", "postgresql"), default="sqlite")
    ap.add_argument("--replicas", type=int, default=1, help="serve processes (PostgreSQL: >= 1)")
    ap.add_argument("--raters", type=int, default=50)
    ap.add_argument("--kill-after", type=float, default=25.0)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "raters.json"))
    args = ap.parse_args()
    if args.engine == "sqlite" and args.replicas != 1:
        ap.error("SQLite is one process: --replicas 1")
    res = asyncio.run(main_async(args))
    print(json.dumps(res, indent=1))
    out = Path(args.out)
    runs = json.loads(out.read_text()) if out.is_file() else {}
    runs = runs.get("runs", {}) if isinstance(runs, dict) else {}
    runs[f"{args.engine}-{args.replicas}x-{args.raters}"] = res
    out.write_text(json.dumps({"runs": runs}, indent=1) + "\n", encoding="utf-8")
    ok = res["lost_or_extra"] == 0 and res["duplicates"] == 0
    print("PASS: nothing lost, nothing duplicated" if ok else "FAIL: votes lost or duplicated")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
