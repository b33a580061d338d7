"""Shared fixtures, the suite's parallel run and its fast tier.

The Piper voice is real; it loads once per test process. pyproject's addopts run the suite on
pytest-xdist workers with ``--dist loadfile``: a whole test file per worker (a file's module
fixtures, its servers and its Chromium start once), longest first (see
:mod:`tests.support.schedule`). Timing tests assert on what was recorded, so they hold beside
other workers' tests as on a loaded CI machine. Tests that took 1 s or more in the recorded
run are marked ``slow``; ``pytest -m "not browser and not slow"`` is the fast tier, and
``--fast`` runs it without importing the files that hold none of its tests.
"""

from __future__ import annotations

import contextlib
import os

import pytest

from backends.piper import PiperBackend, PiperOptions
from tests.support import (
    faulty,  # noqa: F401 (registers the ``fault=`` wrapper in every test process)
    schedule,
)
from tests.support.app_util import CHROMIUM, chromium


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


def pytest_addoption(parser):
    parser.addoption(
        "--record-seconds",
        nargs="?",
        const=str(schedule.SECONDS),
        default=None,
        metavar="PATH",
        help="write each test's and shared fixture's seconds in this run to PATH "
        "(default tests/test_seconds.json: the record the schedule and the fast tier read)",
    )

    parser.addoption(
        "--fast",
        action="store_true",
        help=f'the fast tier: -m "{schedule.TIER}", and the files the record found no such '
        "test in are not imported",
    )


def pytest_configure(config):
    path = config.getoption("record_seconds")
    if path:
        config.pluginmanager.register(schedule.Recorder(config, path), "listenlab-record-seconds")
    m = config.option.markexpr
    if config.getoption("fast") and schedule.TIER not in m:  # xdist workers get it already set
        config.option.markexpr = f"({m}) and {schedule.TIER}" if m else schedule.TIER


def pytest_ignore_collect(collection_path, config):
    """``--fast``: a test file with nothing to run in the fast tier is not even imported."""
    if config.getoption("fast") and collection_path.suffix == ".py":
        with contextlib.suppress(ValueError):  # a path outside the repository: not ours
            rel = collection_path.relative_to(config.rootpath).as_posix()
            if schedule.fast_tier_skips(rel):
                return True
    return None


def pytest_itemcollected(item):
    """The recorded slow tests are marked as they are collected, before ``-m`` selects."""
    schedule.mark_if_slow(item)


@pytest.hookimpl(trylast=True)  # after ``-m`` and ``-k`` have deselected: order what runs
def pytest_collection_modifyitems(config, items):
    """On xdist workers, files longest first (xdist hands them out in this order:
    ``--no-loadscope-reorder``). Browser tests need Debian's Chromium. In CI its absence is
    an error, not a skip."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {n: i for i, n in enumerate(schedule.longest_first([it.nodeid for it in items]))}
        items.sort(key=lambda it: rank[it.nodeid])
    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(f"{CHROMIUM} is missing: .ci/run must apt-get install chromium")
    skip = pytest.mark.skip(reason="needs Debian chromium: apt-get install -y chromium ffmpeg")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)
