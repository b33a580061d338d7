"""How long the command line takes to answer: ``listenlab --help`` and ``listenlab test list``.

Why: a command should import only what it uses (#27's goal: both within 0.5 s on the 2-core
machine, median of 5). Each run is a fresh process, as a user types it; one warm-up run first
so the file cache is warm. The store listed is a real, migrated SQLite file with one test row
(made through the store's own API, not SQL).

    python benchmarks/cli_speed.py [--runs 5] [--out benchmarks/results/cli_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 0.5


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {p.stderr[-2000:]}")
    return dt


def make_store(path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from app.store import ListeningTest, Store

    with Store.open(path) as s:
        s.add_test(ListeningTest("bench", "mos", "cli speed"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/cli_speed.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "lab.db"
        make_store(db)
        commands = {
            "listenlab --help": [sys.executable, "-m", "app.cli", "--help"],
            "listenlab test list": [
                sys.executable,
                "-m",
                "app.cli",
                "test",
                "list",
                "--db",
                str(db),
            ],
        }
        results = {}
        for name, argv in commands.items():
            timed(argv)  # warm-up
            runs = [timed(argv) for _ in range(args.runs)]
            med = statistics.median(runs)
            results[name] = {
                "median_s": round(med, 3),
                "runs_s": [round(r, 3) for r in runs],
                "goal_s": GOAL_S,
                "met": med <= GOAL_S,
            }
            print(f"{name:22s} median {med:.3f} s  (runs {', '.join(f'{r:.3f}' for r in runs)})")
    out = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "results": results,
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
