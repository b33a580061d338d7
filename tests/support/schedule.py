"""How the suite is cut into work for pytest-xdist, in which order, and which tests are slow.

A unit of work is a test file: pyproject's addopts run xdist with ``--dist loadfile``, so a
file runs whole on one worker and its module fixtures (servers, Chromium, voices) start once.
Files are handed out longest first (the LPT rule) by the seconds their tests took in a
recorded run: every worker sorts its own collection (:func:`longest_first`, called from
``tests/conftest.py``'s ``pytest_collection_modifyitems``), and ``--no-loadscope-reorder``
tells xdist to hand files out in collection order. Only xdist's documented options and
pytest's public hooks are used, so an xdist upgrade cannot break it silently.

A test is *slow* (the fast tier leaves it out: ``pytest -m "not browser and not slow"``) when
it is marked ``@pytest.mark.slow``, when it took :data:`SLOW_S` seconds or more (setup, call
and teardown) in the recorded run, or when it needs a shared fixture (module, class or package
scope: a server, Chromium, a corpus of takes) whose setup took :data:`SLOW_S` or more: that
cost falls on whichever of the file's tests runs first. The record is
``tests/test_seconds.json``; refresh it (a whole run) after adding, renaming or slowing tests::

    .venv/bin/python -m pytest --record-seconds
"""

from __future__ import annotations

import ast
import functools
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SECONDS = TESTS / "test_seconds.json"

SLOW_S = 1.0
"""A test that took this long (setup + call + teardown) in the recorded run is ``slow``. The
record is made by a whole run on 4 workers, so its seconds are a loaded machine's (about twice
an idle one's); at 1 s the fast tier's recorded time is ~150 s over 2 workers, inside the
2-minute goal with room for setup (at 2 s it was ~310 s: too much)."""

DEFAULT_PER_TEST_S = 1.0
"""A test not in the record (new or renamed) counts this many seconds when files are ordered;
it is not slow until the record says so (or it is marked)."""


def unit(nodeid: str) -> str:
    """The unit of work ``nodeid`` belongs to: its file (what ``--dist loadfile`` groups by)."""
    return nodeid.split("::", 1)[0]


@functools.cache
def record() -> dict:
    """The recorded run: ``tests`` (seconds per test id), ``fixtures`` (setup seconds per
    shared fixture, keyed ``<node id of its scope>::<name>``) and ``fast_files`` (the files
    that held a fast-tier test); empty when missing."""
    try:
        raw = json.loads(SECONDS.read_text())
        rec = {k: {str(n): float(v) for n, v in raw.get(k, {}).items()} for k in KEYS}
        return {**rec, "fast_files": list(raw.get("fast_files", []))}
    except (OSError, ValueError, AttributeError):
        return {"tests": {}, "fixtures": {}, "fast_files": []}


KEYS = ("tests", "fixtures")


def recorded() -> dict[str, float]:
    """Seconds per test id in the recorded run."""
    return record()["tests"]


def fixture_keys(nodeid: str, names: list[str]) -> list[str]:
    """The record's keys a test with these fixture names may have set up: each name at the
    test's package folders, its file and its class (the scopes a shared fixture is cached at).
    Not the session's: a session fixture (the CPU voice, the PostgreSQL cluster) is set up once
    per worker whichever tests run, so it makes no test slow."""
    parts = nodeid.split("[", 1)[0].split("::")
    folders = parts[0].split("/")[:-1]
    scopes = ["/".join(folders[:i]) for i in range(1, len(folders) + 1)]  # package folders
    scopes += ["::".join(parts[:i]) for i in range(1, len(parts))]  # file, class
    return [f"{s}::{n}" for n in names for s in scopes]


def is_slow(nodeid: str, fixtures: list[str] = (), rec: dict | None = None) -> bool:
    """Whether the record makes ``nodeid`` slow (see the module docstring)."""
    rec = record() if rec is None else rec
    if rec["tests"].get(nodeid, 0.0) >= SLOW_S:
        return True
    return any(rec["fixtures"].get(k, 0.0) >= SLOW_S for k in fixture_keys(nodeid, fixtures))


def longest_first(
    nodeids: list[str], unit_of: Callable[[str], str] = unit, secs: dict[str, float] | None = None
) -> list[str]:
    """``nodeids`` reordered so that units come longest first (by the recorded seconds of
    their tests); a unit's tests stay together and in their own order."""
    secs = recorded() if secs is None else secs
    groups: dict[str, list[str]] = defaultdict(list)
    for n in nodeids:
        groups[unit_of(n)].append(n)

    def key(u: str) -> float:
        return -sum(secs.get(n, DEFAULT_PER_TEST_S) for n in groups[u])

    order = sorted(groups, key=key)  # stable: equal estimates keep collection order
    return [n for u in order for n in groups[u]]


class Recorder:
    """``--record-seconds [PATH]``: writes the record (:data:`SECONDS`) at the end of a run.

    Each test's seconds come from its reports (setup, call, teardown: what the controller sees
    of every worker). What only the process that runs a test knows travels with its setup
    report (``user_properties``, which xdist carries): each shared fixture's setup seconds,
    timed where it ran, and the test's fixture names and ``browser``/``slow`` marks, from which
    the controller works out which files hold a fast-tier test (``fast_files``)."""

    FIXTURES = "fixture_setup_s"
    ITEM = "fixtures_and_marks"

    def __init__(self, config: pytest.Config, path: str | Path = SECONDS):
        self.config = config
        self.path = Path(path)
        self.tests: dict[str, float] = defaultdict(float)
        self.fixtures: dict[str, float] = {}
        self.items: dict[str, tuple[list[str], list[str]]] = {}
        self.pending: dict[str, float] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            return (yield)
        finally:
            if request.scope != "function":
                key = f"{request.node.nodeid}::{request.fixturename}"
                self.pending[key] = round(time.perf_counter() - t0, 2)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        try:
            return (yield)
        finally:
            marks = {m.name for m in item.iter_markers()} & set(TIER_MARKS)
            if item.stash.get(SLOW_BY_RULE, False):
                marks.discard("slow")  # the last record's verdict: this run's record decides
            marks = sorted(marks)
            item.user_properties.append(
                (self.ITEM, [list(getattr(item, "fixturenames", [])), marks])
            )
            if self.pending:
                item.user_properties.append((self.FIXTURES, dict(self.pending)))
                self.pending.clear()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.tests[report.nodeid] += report.duration
        for name, value in report.user_properties:
            if name == self.FIXTURES:
                for k, v in value.items():
                    self.fixtures[k] = max(v, self.fixtures.get(k, 0.0))
            elif name == self.ITEM:
                self.items[report.nodeid] = (value[0], value[1])

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput"):
            return  # a worker: its reports reached the controller, which writes the record
        rec = {
            "tests": {k: round(v, 2) for k, v in sorted(self.tests.items())},
            "fixtures": dict(sorted(self.fixtures.items())),
        }
        fast = {
            unit(n)
            for n, (names, marks) in self.items.items()
            if not marks and not is_slow(n, names, rec)
        }
        out = {
            "how": f"pytest --record-seconds, load average {os.getloadavg()[0]:.1f} at the end",
            **rec,
            "fast_files": sorted(fast),
        }
        self.path.write_text(json.dumps(out, indent=0) + "\n")


# --------------------------------------------------------------------------- the fast tier

TIER_MARKS = ("browser", "slow")
SLOW_BY_RULE = pytest.StashKey[bool]()
"""Set on an item the record (not its source) marks ``slow``."""


def mark_if_slow(item: pytest.Item) -> None:
    """Mark ``item`` slow when the record says so (an explicit mark stays as it is)."""
    if item.get_closest_marker("slow") is None and is_slow(
        item.nodeid, getattr(item, "fixturenames", [])
    ):
        item.add_marker(pytest.mark.slow)
        item.stash[SLOW_BY_RULE] = True


TIER = "not browser and not slow"
"""The fast tier's selection (``-m``); ``--fast`` is it, without importing files it skips."""


def defined_tests(path: Path) -> set[str]:
    """Test names a file defines (``test_x``, ``TestA::test_y``), read without importing it."""
    out = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name.startswith("test"):
                out.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            out |= {
                f"{node.name}::{f.name}"
                for f in node.body
                if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                and f.name.startswith("test")
            }
    return out


def fast_tier_skips(file: str, rec: dict | None = None, root: Path = ROOT) -> bool:
    """Whether ``--fast`` need not import ``file`` (a path from the root): the record ran it,
    found no fast-tier test in it, and it defines no test the record lacks (a new test there
    is collected, and runs if it is fast)."""
    rec = record() if rec is None else rec
    recorded = {n.split("[", 1)[0].split("::", 1)[1] for n in rec["tests"] if unit(n) == file}
    if not recorded or file in rec.get("fast_files", ()):
        return False
    return defined_tests(root / file) <= recorded
