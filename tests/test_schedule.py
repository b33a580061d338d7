"""The suite's own parallel run (``tests/support/schedule.py`` and the xdist hooks in conftest.py):
a unit of work runs whole on one worker, so its module fixtures (servers, Chromium, voices)
start once, and units are handed out longest first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.support import schedule as _schedule

ROOT = Path(__file__).resolve().parents[1]


def test_units():
    u = lambda n: _schedule.unit(ROOT, n)  # noqa: E731
    assert u("tests/test_stats.py::test_x") == "tests/test_stats.py"
    assert u("tests/test_stats.py::TestA::test_x[1]") == "tests/test_stats.py"
    # a folder with its own conftest.py is one unit (its session fixtures start once)
    assert u("tests/conformance/test_wire.py::test_x") == "tests/conformance"
    # the real-time listening files: each test is a unit, its parametrised cases together
    f = "tests/test_listening_routes.py"
    assert u(f + "::test_a[x-1]") == u(f + "::test_a[y-2]") == f + "::test_a"
    assert u(f + "::test_b") == f + "::test_b"


def test_longest_first_keeps_units_whole_and_in_their_order(monkeypatch):
    monkeypatch.setattr(_schedule, "recorded", lambda: {"a": 1.0, "b": 30.0, "c": 5.0})
    ids = ["a::1", "a::2", "b::1", "c::1", "b::2", "d::1", "d::2", "d::3"]
    got = _schedule.longest_first(ids, lambda n: n.split("::")[0])
    # b (30 s), c (5 s), d (not recorded: 1 s per test, 3 s), a (1 s)
    assert got == ["b::1", "b::2", "c::1", "d::1", "d::2", "d::3", "a::1", "a::2"]


def test_each_file_runs_whole_on_one_worker():
    """Three workers, four files whose longest-first order differs from collection order: a
    scheduler that reorders only its own view sends workers indexes into their (unreordered)
    collections, and files are cut across workers (each one starting the module's fixtures
    again). Seen in the suite as test_glitch.py's module fixtures set up four times."""
    files = [
        "tests/test_arena.py",
        "tests/test_listening_cli.py",
        "tests/test_stats.py",
        "tests/test_voices.py",
    ]
    secs = _schedule.recorded()
    order = sorted(files, key=lambda f: -secs[f])
    assert order != files  # the case that used to go wrong
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST_"))}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "3", "-v", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    started: dict[str, list[str]] = defaultdict(list)
    for gw, nodeid in re.findall(r"^\[(gw\d+)\] \[ *\d+%\] PASSED (\S+)", r.stdout, re.M):
        file = nodeid.split("::")[0]
        workers[file].add(gw)
        if file not in started[gw]:
            started[gw].append(file)
    assert sorted(workers) == files
    assert all(len(w) == 1 for w in workers.values()), dict(workers)
    # each worker took its files longest first
    for got in started.values():
        assert got == [f for f in order if f in got]
