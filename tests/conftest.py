"""Shared fixtures and the suite's parallel run.

The Piper voice is real; it loads once per test process. pyproject's addopts run the suite on
pytest-xdist workers, a whole test file per worker (a file's module fixtures, its servers and
its Chromium, start once), longest first (see :mod:`tests._schedule`).
Tests marked ``alone`` measure the machine's spare compute; they run while no other worker runs
a test (see :func:`_turn`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.piper import PiperBackend, PiperOptions
from tests import _schedule
from tests._app_util import CHROMIUM, chromium


@pytest.fixture(scope="session")
def piper_det() -> PiperBackend:
    """The bundled CPU voice with noise scales 0: identical text gives identical samples."""
    b = PiperBackend(options=PiperOptions(deterministic=True))
    b.warm_up()
    return b


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium context (fresh user-data-dir) shared by a browser test module."""
    with chromium() as ctx:
        yield ctx


def pytest_collection_modifyitems(config, items):
    """On xdist workers, units longest first (see :func:`pytest_xdist_make_scheduler`).
    Browser tests need Debian's Chromium. In CI its absence is an error, not a skip."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        ids = [it.nodeid for it in items]
        rank = {n: i for i, n in enumerate(_schedule.longest_first(ids, _unit_of(config)))}
        items.sort(key=lambda it: rank[it.nodeid])
    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(f"{CHROMIUM} is missing: .ci/run must apt-get install chromium")
    skip = pytest.mark.skip(reason="needs Debian chromium: apt-get install -y chromium ffmpeg")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


# --------------------------------------------------------------------------- parallel run


def _unit_of(config):
    return lambda nodeid: _schedule.unit(config.rootpath, nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``, except that a test without an ``xdist_group`` mark goes with its
    unit (:func:`tests._schedule.unit`: plain loadgroup sends tests one by one, so each worker
    would start the module's fixtures again). With pytest 9.2 and xdist 3.8, xdist_group marks
    do not reach the scheduler (xdist renames ``item._nodeid``, pytest now reads ``item._id``):
    the unit rule is what groups tests today.

    Units are handed out in collection order, which the workers' own
    :func:`pytest_collection_modifyitems` made longest first. The order must come from the
    workers: the scheduler sends each worker indexes into that worker's collection, so a
    reordering done here alone makes the workers run other tests than the ones scheduled."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    config.option.loadscopereorder = False  # keep the workers' (longest first) order
    unit_of = _unit_of(config)

    class ByUnit(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            group = super()._split_scope(nodeid)
            return unit_of(nodeid) if group == nodeid else group

    return ByUnit(config, log)


# --------------------------------------------------------------------------- tests run alone


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    with open(path, "a+b") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def _turn(run_dir: Path, alone: bool) -> Iterator[None]:
    """A readers-writer lock over the xdist workers of one run, on two lock files.

    Every test holds ``tests.lock`` shared; an ``alone`` test holds it exclusively, so it starts
    when the tests running on other workers have ended and none starts until it ends. Taking
    ``gate.lock`` first gives it priority: new tests queue behind it instead of starving it.
    """
    gate, tests = run_dir / "gate.lock", run_dir / "tests.lock"
    if alone:
        with _flock(gate, fcntl.LOCK_EX), _flock(tests, fcntl.LOCK_EX):
            yield
    else:
        with contextlib.ExitStack() as stack:
            with _flock(gate, fcntl.LOCK_EX):
                stack.enter_context(_flock(tests, fcntl.LOCK_SH))
            yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under xdist, setup (module fixtures included), call and teardown take their turn."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    # a worker's basetemp is <the run's basetemp>/<worker id>: the parent is the run's own
    run_dir = item.config._tmp_path_factory.getbasetemp().parent
    with _turn(run_dir, item.get_closest_marker("alone") is not None):
        yield
