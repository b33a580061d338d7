"""How the suite is cut into work for pytest-xdist, in which order, and which tests are slow.

A unit of work is a test file: pyproject's addopts run xdist with ``--dist loadfile``, so a
file runs whole on one worker and its module fixtures (servers, Chromium, voices) start once.
Files are handed out longest first (the LPT rule) by the seconds their tests took in a
recorded run: every worker sorts its own collection (:func:`longest_first`, called from
``tests/conftest.py``'s ``pytest_collection_modifyitems``), and ``--no-loadscope-reorder``
tells xdist to hand files out in collection order. Only xdist's documented options and
pytest's public hooks are used, so an xdist upgrade cannot break it silently.

A test is *slow* (the fast tier leaves it out: ``pytest -m "not browser and not slow"``) when
it is marked ``@pytest.mark.slow``, or when it took :data:`SLOW_S` seconds or more (setup,
call and teardown) in the recorded run. The record is ``tests/test_seconds.json``; refresh it
after adding, renaming or slowing tests::

    .venv/bin/python -m pytest --junitxml=/tmp/suite.xml
    .venv/bin/python -m tests.support.schedule /tmp/suite.xml
"""

from __future__ import annotations

import functools
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SECONDS = TESTS / "test_seconds.json"

SLOW_S = 2.0
"""A test that took this long (setup + call + teardown) in the recorded run is ``slow``."""

DEFAULT_PER_TEST_S = 1.0
"""A test not in the record (new or renamed) counts this many seconds when files are ordered;
it is not slow until the record says so (or it is marked)."""


def unit(nodeid: str) -> str:
    """The unit of work ``nodeid`` belongs to: its file (what ``--dist loadfile`` groups by)."""
    return nodeid.split("::", 1)[0]


@functools.cache
def recorded() -> dict[str, float]:
    """Seconds per test id in the recorded run (empty when the record is missing)."""
    try:
        return {str(k): float(v) for k, v in json.loads(SECONDS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def is_slow(nodeid: str, secs: dict[str, float] | None = None) -> bool:
    """Whether the record says ``nodeid`` is slow (see the module docstring)."""
    return (recorded() if secs is None else secs).get(nodeid, 0.0) >= SLOW_S


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


def from_junit(path: Path) -> dict[str, float]:
    """Wall seconds per test id from a ``--junitxml`` report (setup + call + teardown), sorted
    by id (a refresh then shows as a readable diff)."""
    out: dict[str, float] = defaultdict(float)
    for case in ET.parse(path).iter("testcase"):
        parts = case.get("classname", "").split(".")
        cls = ""
        while parts and parts[-1][:1].isupper():  # TestA (or TestA.TestB) inside the module
            cls = parts.pop() + "::" + cls
        nodeid = "/".join(parts) + ".py::" + cls + case.get("name", "")
        out[nodeid] += float(case.get("time") or 0)
    return {k: round(v, 2) for k, v in sorted(out.items())}


if __name__ == "__main__":
    SECONDS.write_text(json.dumps(from_junit(Path(sys.argv[1])), indent=0) + "\n")
    print(f"wrote {SECONDS}")
