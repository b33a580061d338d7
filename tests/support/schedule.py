"""How the suite's tests are cut into units of work for pytest-xdist, and in which order.

A unit is a test file (its module fixtures, servers and Chromium start once per unit), a
folder with its own conftest.py (its session fixtures start once), or, for the files in
:data:`SPLIT`, a single test: their tests wait on real-time audio, share nothing expensive,
and would otherwise hold one worker for minutes at the end of the run.

Units are handed out longest first (the LPT rule), by the wall seconds each took in a recorded
run (``unit_seconds.json``). Refresh that file after adding slow tests::

    .venv/bin/python -m pytest --junitxml=/tmp/suite.xml
    .venv/bin/python -m tests.support.schedule /tmp/suite.xml
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SECONDS = TESTS / "unit_seconds.json"

#: files whose tests are units of their own (each starts the module's server again: ~1 s)
SPLIT = frozenset({"tests/test_listening_routes.py", "tests/test_browser_listening.py"})

#: a unit not in the recorded run (a new file or test) counts this many seconds per test
DEFAULT_PER_TEST_S = 1.0


def unit(root: Path, nodeid: str) -> str:
    """The unit ``nodeid`` belongs to (see the module docstring)."""
    file = nodeid.split("::", 1)[0]
    if file in SPLIT:
        return nodeid.split("[", 1)[0]  # parametrised cases of one test stay together
    out, d = file, (root / file).parent
    while d != TESTS and TESTS in d.parents:
        if (d / "conftest.py").is_file():
            out = d.relative_to(root).as_posix()
        d = d.parent
    return out


def recorded() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(SECONDS.read_text()).items()}
    except (OSError, ValueError):
        return {}


def longest_first(nodeids: list[str], unit_of) -> list[str]:
    """``nodeids`` reordered so that units (``unit_of(nodeid)``) come longest first; a unit's
    tests stay together and in their own order."""
    secs = recorded()
    groups: dict[str, list[str]] = defaultdict(list)
    for n in nodeids:
        groups[unit_of(n)].append(n)

    def key(u: str) -> float:
        return -secs.get(u, DEFAULT_PER_TEST_S * len(groups[u]))

    order = sorted(groups, key=key)  # stable: equal estimates keep collection order
    return [n for u in order for n in groups[u]]


def from_junit(path: Path) -> dict[str, float]:
    """Wall seconds per unit from a ``--junitxml`` report (setup + call + teardown)."""
    out: dict[str, float] = defaultdict(float)
    for case in ET.parse(path).iter("testcase"):
        parts = case.get("classname", "").split(".")
        cls = parts.pop() + "::" if parts and parts[-1][:1].isupper() else ""
        nodeid = "/".join(parts) + ".py::" + cls + case.get("name", "")
        out[unit(ROOT, nodeid)] += float(case.get("time") or 0)
    return {k: round(v, 1) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


if __name__ == "__main__":
    SECONDS.write_text(json.dumps(from_junit(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {SECONDS}")
