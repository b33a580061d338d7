"""Shared fixtures. The Piper voice is real; it loads once per test session."""

from __future__ import annotations

import pytest

from backends.piper import PiperBackend, PiperOptions
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
    """Browser tests need Debian's Chromium. In CI its absence is an error, not a skip."""
    import os

    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI"):
        raise pytest.UsageError(f"{CHROMIUM} is missing: .ci/run must apt-get install chromium")
    skip = pytest.mark.skip(reason="needs Debian chromium: apt-get install -y chromium ffmpeg")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)
