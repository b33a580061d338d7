"""Shared fixtures and the suite's parallel run.

The Piper voice is real; it loads once per test process. pyproject's addopts run the suite on
pytest-xdist workers, a whole test file per worker (a file's module fixtures, its servers and
its Chromium, start once), longest first (see :mod:`tests.support.schedule`). Timing tests assert on
what was recorded, so they hold beside other workers' tests as on a loaded CI machine.
"""

from __future__ import annotations

import os

import pytest

from backends.piper import PiperBackend, PiperOptions
from tests.support import faulty  # noqa: F401 (registers the ``fault=`` wrapper in every test process)
from tests.support import schedule as _schedule
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
    unit (:func:`tests.support.schedule.unit`: plain loadgroup sends tests one by one, so each worker
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
