"""How long the test suite takes to collect, and how long its fast tier takes to run.

Why: every pytest-xdist worker collects the whole suite before it runs a test, so collection
is paid once per worker on every run; and the fast tier (``pytest -m "not browser and not
slow"``, run as ``--fast``: docs/development.md) promises a developer an answer within 2 minutes on 2 cores.
Each figure is a fresh ``python -m pytest`` process from the repository root; the load average
is recorded before and after each, since the machine may be shared.

*Collection* is ``pytest --collect-only -q -n 0`` (one process, no workers): ``--runs`` times,
median. With ``--cold`` each run first deletes the repository's ``__pycache__`` folders and sets
``PYTHONDONTWRITEBYTECODE=1``, so every run compiles the project's modules and rewrites the
tests' asserts again (as a fresh clone, or a machine that sets that variable, does); otherwise
the caches stay and only the first run fills them.

*The fast tier* is the documented command (``pytest -n 2 --fast``), run once, with its counts;
its collection is also timed alone (``--collect-only --fast``).

    python benchmarks/suite_speed.py [--runs 3] [--cold] [--workers 2] [--no-tier]
        [--out benchmarks/results/suite_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIER = ["--fast"]
"""The fast tier: the tests of ``-m "not browser and not slow"``, files with none not imported."""
GOAL_S = 120.0
SOURCES = ("app", "backends", "evaluation", "voices", "tests", "benchmarks", "assets")


def load() -> float:
    return round(os.getloadavg()[0], 2)


def clear_caches() -> None:
    for top in SOURCES:
        for d in (ROOT / top).rglob("__pycache__"):
            shutil.rmtree(d, ignore_errors=True)


def run(argv: list[str], env: dict[str, str], timeout: float) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - t0, p.stdout + p.stderr


def collection(runs: int, cold: bool, extra: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST_"))}
    if cold:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0"]
    argv += ["-p", "no:cacheprovider", *extra]
    out = []
    for _ in range(runs):
        if cold:
            clear_caches()
        before = load()
        wall, text = run(argv, env, 600)
        m = re.search(r"(\d+)(?:/\d+)? tests? collected (?:\(\d+ deselected\) )?in ([\d.]+)s", text)
        if m is None:
            raise SystemExit(f"collection failed:\n{text[-3000:]}")
        out.append(
            {
                "wall_s": round(wall, 2),
                "pytest_says_s": float(m.group(2)),
                "tests": int(m.group(1)),
                "load_before": before,
                "load_after": load(),
            }
        )
        print(f"collect {' '.join(extra)}: {out[-1]}", flush=True)
    return {
        "args": extra,
        "cold": cold,
        "median_wall_s": round(statistics.median(r["wall_s"] for r in out), 2),
        "runs": out,
    }


def fast_tier(workers: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST_"))}
    argv = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), *TIER]
    argv += ["-p", "no:cacheprovider"]
    before = load()
    wall, text = run(argv, env, 1800)
    counts = {
        k: int(v)
        for v, k in re.findall(r"(\d+) (passed|failed|skipped|deselected|errors?)", text[-600:])
    }
    res = {
        "command": " ".join(["python -m pytest", "-n", str(workers), *TIER]),
        "wall_s": round(wall, 1),
        "goal_s": GOAL_S,
        "met": wall <= GOAL_S,
        "counts": counts,
        "load_before": before,
        "load_after": load(),
    }
    print(f"fast tier: {res}", flush=True)
    if counts.get("failed") or counts.get("error") or counts.get("errors"):
        print(text[-4000:])
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cold", action="store_true", help="no bytecode or assert-rewrite caches")
    ap.add_argument("--workers", type=int, default=2, help="xdist workers for the fast tier")
    ap.add_argument("--no-tier", action="store_true", help="time collection only")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/suite_speed.json"))
    args = ap.parse_args()
    result = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "collection": collection(args.runs, args.cold, []),
        "collection_fast_tier": collection(args.runs, args.cold, TIER),
    }
    if not args.no_tier:
        result["fast_tier"] = fast_tier(args.workers)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
