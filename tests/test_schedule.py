"""The suite's own parallel run (``tests/support/schedule.py`` and conftest.py's collection hook):
a file runs whole on one worker, so its module fixtures (servers, Chromium, voices) start once,
files are handed out longest first, and the fast tier leaves out the recorded slow tests."""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support import schedule as _schedule

ROOT = Path(__file__).resolve().parents[1]


def test_units_are_files():
    u = _schedule.unit
    assert u("tests/test_stats.py::test_x") == "tests/test_stats.py"
    assert u("tests/test_stats.py::TestA::test_x[a::b]") == "tests/test_stats.py"
    assert u("tests/conformance/test_wire.py::test_x") == "tests/conformance/test_wire.py"


def test_longest_first_keeps_units_whole_and_in_their_order():
    secs = {"a::1": 0.5, "a::2": 0.5, "b::1": 20.0, "b::2": 10.0, "c::1": 5.0}
    ids = ["a::1", "a::2", "b::1", "c::1", "b::2", "d::1", "d::2", "d::3"]
    got = _schedule.longest_first(ids, secs=secs)
    # b (30 s), c (5 s), d (not recorded: 1 s per test, 3 s), a (1 s)
    assert got == ["b::1", "b::2", "c::1", "d::1", "d::2", "d::3", "a::1", "a::2"]


def test_slow_is_what_the_record_says():
    rec = {
        "tests": {"t.py::fast": _schedule.SLOW_S - 0.01, "t.py::slow": _schedule.SLOW_S},
        "fixtures": {
            "t.py::server": 30.0,  # a module fixture: its tests are slow, whichever runs first
            "t.py::TestA::db": 3.0,
            "::voice": 9.0,  # a session fixture: once per worker, whichever tests run
            "u.py::server": 0.1,
        },
    }
    assert not _schedule.is_slow("t.py::fast", rec=rec)
    assert _schedule.is_slow("t.py::slow", rec=rec)
    assert not _schedule.is_slow("t.py::new", rec=rec)  # not recorded: fast until re-recorded
    assert _schedule.is_slow("t.py::new", ["tmp_path", "server"], rec=rec)
    assert not _schedule.is_slow("u.py::x", ["server", "voice"], rec=rec)
    assert _schedule.is_slow("t.py::TestA::test_y[1]", ["db"], rec=rec)
    assert not _schedule.is_slow("t.py::TestB::test_y", ["db"], rec=rec)
    keys = _schedule.fixture_keys("tests/sub/test_x.py::TestA::test_y[a::b]", ["f"])
    assert keys == [
        "tests::f",
        "tests/sub::f",
        "tests/sub/test_x.py::f",
        "tests/sub/test_x.py::TestA::f",
    ]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_recorder_times_tests_and_shared_fixtures(tmp_path, workers):
    """``--record-seconds``: a module fixture's setup is timed where it runs (an xdist worker)
    and reaches the record with the test that caused it; each test's seconds are its setup,
    call and teardown."""
    out = tmp_path / "record.json"
    (tmp_path / "conftest.py").write_text(
        "from tests.support.schedule import Recorder\n"
        "def pytest_configure(config):\n"
        f"    config.pluginmanager.register(Recorder(config, {str(out)!r}), 'rec')\n"
    )
    (tmp_path / "test_m.py").write_text(
        "import time, pytest\n"
        "@pytest.fixture(scope='module')\n"
        "def server():\n"
        "    time.sleep(0.4)\n"
        "    yield 1\n"
        "def test_first(server, tmp_path):\n"
        "    time.sleep(0.2)\n"
        "def test_second(server):\n"
        "    pass\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST_"))}
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", workers, "--dist", "loadfile"]
        + ["-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:]
    rec = json.loads(out.read_text())
    assert rec["tests"]["test_m.py::test_first"] >= 0.6  # setup 0.4 + call 0.2
    assert rec["tests"]["test_m.py::test_second"] < 0.4
    assert 0.4 <= rec["fixtures"]["test_m.py::server"] < rec["tests"]["test_m.py::test_first"]
    assert not any(k.endswith("::tmp_path") for k in rec["fixtures"])  # function scope: its test's
    assert rec["fast_files"] == ["test_m.py"]  # test_second: fast, and its fixture took < 2 s


def test_the_record_names_tests_that_exist():
    """Most recorded ids are the suite's own (a rename leaves a stale id: re-record)."""
    secs = _schedule.recorded()
    files = {_schedule.unit(n) for n in secs}
    assert len(secs) > 500 and all((ROOT / f).is_file() for f in files if "conformance" not in f)


def test_the_scheduler_uses_only_xdists_documented_options():
    """No private xdist class or method (``_split_scope`` broke with pytest 9.2's node ids):
    ``--dist loadfile --no-loadscope-reorder`` and the workers' own collection order."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    opts = project["tool"]["pytest"]["ini_options"]
    assert opts["addopts"].split()[-3:] == ["--dist", "loadfile", "--no-loadscope-reorder"]
    assert "pytest-xdist>=3.8" in project["project"]["optional-dependencies"]["test"]  # the option
    for p in (ROOT / "tests").rglob("*.py"):
        text = p.read_text()
        assert "xdist.scheduler" not in text or p.name == "test_schedule.py", p
        assert "pytest_xdist_make_scheduler" not in text or p.name == "test_schedule.py", p


def collect(*args: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "XDIST_"))}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "--collect-only"]
        + ["-q", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 5), r.stdout[-2000:]  # 5: nothing collected
    return {ln for ln in r.stdout.splitlines() if "::" in ln}


def test_the_fast_tier_leaves_out_slow_and_browser_tests():
    """``-m "not browser and not slow"`` selects by the record's rule (marks applied before
    pytest's own selection); ``--fast`` selects the same tests without importing the files
    that hold none of them."""
    files = ["tests/test_schedule.py", "tests/test_browser_arena.py", "tests/test_replicas.py"]
    assert not _schedule.fast_tier_skips(files[0])
    assert _schedule.fast_tier_skips(files[1]) and _schedule.fast_tier_skips(files[2])
    picked = collect("-m", _schedule.TIER, *files)
    assert picked and all(ln.startswith("tests/test_schedule.py::") for ln in picked)
    slow_here = {n for n in _schedule.recorded() if n.startswith(files[0] + "::")}
    slow_here = {n for n in slow_here if _schedule.is_slow(n)}
    assert slow_here and not (picked & slow_here), slow_here
    assert collect("--fast", *files) == picked
    assert collect("--fast", "-m", "not slow", files[1]) == set()  # --fast narrows any -m


def test_fast_skips_a_file_only_when_the_record_knows_all_its_tests(tmp_path):
    rec = {
        "tests": {"tests/t.py::test_a": 9.0, "tests/t.py::TestB::test_c[1]": 9.0},
        "fixtures": {},
        "fast_files": ["tests/u.py"],
    }
    (tmp_path / "tests").mkdir()
    t = tmp_path / "tests" / "t.py"
    t.write_text("def test_a(): pass\nclass TestB:\n    def test_c(self): pass\n")
    assert _schedule.defined_tests(t) == {"test_a", "TestB::test_c"}
    assert _schedule.fast_tier_skips("tests/t.py", rec, tmp_path)  # all slow, all recorded
    t.write_text(t.read_text() + "async def test_new(): pass\n")
    assert not _schedule.fast_tier_skips("tests/t.py", rec, tmp_path)  # a test it lacks
    (tmp_path / "tests" / "u.py").write_text("def test_x(): pass\n")
    rec["tests"]["tests/u.py::test_x"] = 9.0
    assert not _schedule.fast_tier_skips("tests/u.py", rec, tmp_path)  # it held a fast test
    assert not _schedule.fast_tier_skips("tests/v.py", rec, tmp_path)  # never recorded


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
    order = sorted(files, key=lambda f: -sum(v for n, v in secs.items() if n.startswith(f)))
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


# --------------------------------------------------------------------------- collection

GRADIO_AT_COLLECTION = {
    # Shrinking: each imports app.listening.admin_ui at module level, which imports Gradio
    # (~2 s of CPU in every test process, a third of collecting the whole suite). The kinds
    # helper splits admin_ui (#37); the integrator empties this once the imports are lazy.
    "tests/test_listening_crowd.py",
    "tests/test_not_persistent.py",
}


@functools.cache
def top_level_imports(path: Path) -> set[str]:
    """Modules importing ``path`` imports: its module body, into ``if``/``try``/``with`` and
    class bodies, not into functions or ``if TYPE_CHECKING:``."""
    pkg = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out: set[str] = set()
    todo = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}  # kept only if a module
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody
            todo += [s for h in node.handlers for s in h.body]
        elif isinstance(node, ast.With | ast.ClassDef):
            todo += node.body
    return out


def import_closure(start: Path) -> set[str]:
    """Every module (the repo's and third-party top-level names) importing ``start`` loads."""
    seen: set[str] = set()
    todo = sorted(top_level_imports(start))
    while todo:
        mod = todo.pop()
        parts = mod.split(".")
        for i in range(1, len(parts) + 1):  # a submodule imports its packages first
            name = ".".join(parts[:i])
            if name in seen:
                continue
            file = ROOT.joinpath(*name.split("."))
            path = file.with_suffix(".py") if file.with_suffix(".py").is_file() else None
            path = path or (file / "__init__.py" if (file / "__init__.py").is_file() else None)
            if path is None and i > 1:
                continue  # ``from pkg import name``: a name, not a module
            seen.add(name)
            if path is not None:
                todo += sorted(top_level_imports(path))
    return seen


def test_collecting_the_suite_does_not_import_gradio():
    """Every xdist worker collects the whole suite; Gradio's import is most of what a test
    file can add to that. Tests that need Gradio import it when they run."""
    files = sorted((ROOT / "tests").glob("test_*.py")) + [ROOT / "tests" / "conftest.py"]
    found = {p.relative_to(ROOT).as_posix() for p in files if "gradio" in import_closure(p)}
    assert found - GRADIO_AT_COLLECTION == set(), "imports Gradio when collected"
    assert GRADIO_AT_COLLECTION - found == set(), "no longer: remove from GRADIO_AT_COLLECTION"
    # the check sees a chain through the app: the designer's page imports Gradio itself
    assert "gradio" in import_closure(ROOT / "app" / "listening" / "upload_ui.py")
